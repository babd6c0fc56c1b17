/* SPDX-License-Identifier: MIT */
/*
 * Display: an SDL2 window with a one-line overlay (the file of what was
 * shown is the recorder's, pps-recorder.c). SDL runs on the main thread (the event loop's); its
 * window events are read when a frame is shown and from a slow UI timer, never by spinning.
 */
#include "pps-client-internal.h"

#include <SDL.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const pps_display_mode_names[] = {
    [PPS_DISPLAY_AUTO] = "auto",
    [PPS_DISPLAY_SDL] = "sdl",
    [PPS_DISPLAY_NONE] = "none",
    [PPS_DISPLAY_MODE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_display_mode_names) / sizeof(pps_display_mode_names[0]) ==
                   PPS_DISPLAY_MODE_COUNT + 1,
               "a name for every pps_display_mode_t");

struct pps_display {
	SDL_Window *window;
	SDL_Renderer *renderer;
	SDL_Texture *texture;
	int tex_width, tex_height;
	pps_frame_t *scratch; /* picture + overlay */
	bool quit;
};

static bool
display_available(void)
{
	const char *x11 = getenv("DISPLAY"), *wayland = getenv("WAYLAND_DISPLAY");

	return (x11 && *x11) || (wayland && *wayland);
}

pps_display_t *
pps_display_new(pps_display_mode_t mode, char *err, size_t err_size)
{
	pps_display_t *d;
	int error = ENODEV; /* unless the failure below says otherwise */

	if ((unsigned)mode >= PPS_DISPLAY_MODE_COUNT) {
		snprintf(err, err_size, "display mode %d: unknown", (int)mode);
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, err_size, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (mode == PPS_DISPLAY_NONE || (mode == PPS_DISPLAY_AUTO && !display_available()))
		return d;
	if (mode == PPS_DISPLAY_SDL && !display_available() && !getenv("SDL_VIDEODRIVER")) {
		/* SDL would fall back to an offscreen driver and show nothing. */
		snprintf(err, err_size,
		         "--display sdl: no display (DISPLAY and WAYLAND_DISPLAY are unset; "
		         "use --display none, or set SDL_VIDEODRIVER)");
		goto err;
	}
	if (SDL_Init(SDL_INIT_VIDEO) < 0) {
		if (mode == PPS_DISPLAY_SDL) {
			snprintf(err, err_size, "display: SDL cannot open a window: %s",
			         SDL_GetError());
			goto err;
		}
		return d; /* auto: fall back to headless */
	}
	d->window = SDL_CreateWindow("ppstream", SDL_WINDOWPOS_UNDEFINED, SDL_WINDOWPOS_UNDEFINED,
	                             640, 480, SDL_WINDOW_RESIZABLE);
	if (d->window)
		d->renderer = SDL_CreateRenderer(d->window, -1, 0);
	if (!d->window || !d->renderer) {
		snprintf(err, err_size, "display: SDL: %s", SDL_GetError());
		if (mode == PPS_DISPLAY_SDL)
			goto err;
		if (d->renderer)
			SDL_DestroyRenderer(d->renderer);
		if (d->window)
			SDL_DestroyWindow(d->window);
		d->window = NULL;
		d->renderer = NULL;
		SDL_Quit();
	}
	return d;
err:
	pps_display_free(d);
	errno = error;
	return NULL;
}

void
pps_display_free(pps_display_t *d)
{
	if (!d)
		return;
	if (d->texture)
		SDL_DestroyTexture(d->texture);
	if (d->renderer)
		SDL_DestroyRenderer(d->renderer);
	if (d->window) {
		SDL_DestroyWindow(d->window);
		SDL_Quit();
	}
	pps_frame_free(d->scratch);
	free(d);
}

bool
pps_display_has_window(const pps_display_t *d)
{
	return d->window != NULL;
}

int
pps_display_show(pps_display_t *d, const pps_frame_t *picture, const char *overlay)
{
	if (!d->window)
		return 0;
	if (!d->scratch || d->scratch->width != picture->width ||
	    d->scratch->height != picture->height) {
		pps_frame_free(d->scratch);
		d->scratch = pps_frame_new(picture->width, picture->height);
		if (!d->scratch)
			return -ENOMEM;
	}
	pps_frame_copy(d->scratch, picture);
	if (overlay)
		pps_overlay_draw(d->scratch, 8, picture->height - 8 - 7 * 2, 2, overlay);
	if (!d->texture || d->tex_width != picture->width || d->tex_height != picture->height) {
		if (d->texture)
			SDL_DestroyTexture(d->texture);
		d->texture =
		    SDL_CreateTexture(d->renderer, SDL_PIXELFORMAT_IYUV,
		                      SDL_TEXTUREACCESS_STREAMING, picture->width, picture->height);
		d->tex_width = picture->width;
		d->tex_height = picture->height;
		SDL_SetWindowSize(d->window, picture->width, picture->height);
		if (!d->texture)
			return -EIO;
	}
	SDL_UpdateYUVTexture(d->texture, NULL, d->scratch->planes[0], d->scratch->strides[0],
	                     d->scratch->planes[1], d->scratch->strides[1], d->scratch->planes[2],
	                     d->scratch->strides[2]);
	SDL_RenderClear(d->renderer);
	SDL_RenderCopy(d->renderer, d->texture, NULL, NULL);
	SDL_RenderPresent(d->renderer);
	pps_display_poll_quit(d);
	return 0;
}

bool
pps_display_poll_quit(pps_display_t *d)
{
	SDL_Event ev;

	if (!d->window)
		return false;
	while (SDL_PollEvent(&ev)) {
		if (ev.type == SDL_QUIT ||
		    (ev.type == SDL_KEYDOWN &&
		     (ev.key.keysym.sym == SDLK_q || ev.key.keysym.sym == SDLK_ESCAPE)))
			d->quit = true;
	}
	return d->quit;
}

/* ---- a 5x7 pixel font for the overlay ----------------------------------- */

typedef struct {
	char c;
	uint8_t rows[7]; /* 5 bits each, MSB = leftmost */
} glyph_t;

static const glyph_t glyphs[] = {
    {'0', {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e}},
    {'1', {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e}},
    {'2', {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f}},
    {'3', {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e}},
    {'4', {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02}},
    {'5', {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e}},
    {'6', {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e}},
    {'7', {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e}},
    {'9', {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c}},
    {':', {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00}},
    {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}},
    {'-', {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00}},
    {'+', {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
    {'a', {0x00, 0x00, 0x0e, 0x01, 0x0f, 0x11, 0x0f}},
    {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1e}},
    {'c', {0x00, 0x00, 0x0e, 0x10, 0x10, 0x11, 0x0e}},
    {'d', {0x01, 0x01, 0x0d, 0x13, 0x11, 0x11, 0x0f}},
    {'e', {0x00, 0x00, 0x0e, 0x11, 0x1f, 0x10, 0x0e}},
    {'f', {0x06, 0x09, 0x08, 0x1c, 0x08, 0x08, 0x08}},
    {'g', {0x00, 0x0f, 0x11, 0x11, 0x0f, 0x01, 0x0e}},
    {'i', {0x04, 0x00, 0x0c, 0x04, 0x04, 0x04, 0x0e}},
    {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}},
    {'l', {0x0c, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}},
    {'m', {0x00, 0x00, 0x1a, 0x15, 0x15, 0x11, 0x11}},
    {'n', {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'o', {0x00, 0x00, 0x0e, 0x11, 0x11, 0x11, 0x0e}},
    {'p', {0x00, 0x00, 0x1e, 0x11, 0x1e, 0x10, 0x10}},
    {'q', {0x00, 0x00, 0x0d, 0x13, 0x0f, 0x01, 0x01}},
    {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
    {'s', {0x00, 0x00, 0x0e, 0x10, 0x0e, 0x01, 0x1e}},
    {'t', {0x08, 0x08, 0x1c, 0x08, 0x08, 0x09, 0x06}},
    {'u', {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0d}},
    {'w', {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0a}},
    {'x', {0x00, 0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11}},
    {'y', {0x00, 0x00, 0x11, 0x11, 0x0f, 0x01, 0x0e}},
};

static const uint8_t *
glyph_rows(char c)
{
	if (c >= 'A' && c <= 'Z')
		c = (char)(c - 'A' + 'a');
	for (size_t i = 0; i < sizeof(glyphs) / sizeof(glyphs[0]); i++) {
		if (glyphs[i].c == c)
			return glyphs[i].rows;
	}
	return NULL; /* space and anything unknown: blank */
}

void
pps_overlay_draw(pps_frame_t *p, int x0, int y0, int scale, const char *text)
{
	int len = (int)strlen(text);
	int box_w = len * 6 * scale + 2 * scale, box_h = 9 * scale;

	/* A dark, colourless box first so the text reads on any picture. */
	for (int y = y0 - scale; y < y0 - scale + box_h; y++) {
		if (y < 0 || y >= p->height)
			continue;
		for (int x = x0 - scale; x < x0 - scale + box_w; x++) {
			if (x < 0 || x >= p->width)
				continue;
			p->planes[0][(size_t)y * (size_t)p->strides[0] + (size_t)x] = 16;
			p->planes[1][(size_t)(y / 2) * (size_t)p->strides[1] + (size_t)(x / 2)] =
			    128;
			p->planes[2][(size_t)(y / 2) * (size_t)p->strides[2] + (size_t)(x / 2)] =
			    128;
		}
	}
	for (int i = 0; i < len; i++) {
		const uint8_t *rows = glyph_rows(text[i]);

		if (!rows)
			continue;
		for (int r = 0; r < 7; r++) {
			for (int c = 0; c < 5; c++) {
				if (!(rows[r] >> (4 - c) & 1))
					continue;
				for (int dy = 0; dy < scale; dy++) {
					for (int dx = 0; dx < scale; dx++) {
						int x = x0 + (i * 6 + c) * scale + dx;
						int y = y0 + r * scale + dy;

						if (x >= 0 && x < p->width && y >= 0 &&
						    y < p->height)
							p->planes[0][(size_t)y *
							                 (size_t)p->strides[0] +
							             (size_t)x] = 235;
					}
				}
			}
		}
	}
}
