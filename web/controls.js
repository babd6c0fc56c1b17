// SPDX-License-Identifier: MIT
// The page's controls around the picture: the notice that says what the
// viewer is doing when it is not streaming and what the user can do about
// it (a token field, "retry now"), the access token (from the URL's
// token= or remembered for this tab in sessionStorage), and fullscreen.
// The connection itself lives in viewer.js; this only shows and asks.

const TOKEN_KEY = 'ppstream.token';

function stored() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null; // storage refused (a sandboxed frame): the URL's token only
  }
}

// The access token to send: the URL's token= wins (a link someone shared),
// then the one typed into this tab's token field.
export function initialToken(params) {
  return params.get('token') ?? stored() ?? '';
}

export class Controls {
  // onToken(token): the user entered a token; onRetry(): "retry now".
  constructor({ onToken, onRetry }) {
    this.notice = document.getElementById('notice');
    this.text = document.getElementById('notice-text');
    this.form = document.getElementById('token-form');
    this.input = document.getElementById('token');
    this.retry = document.getElementById('retry');
    this.stage = document.getElementById('stage');
    this.fullscreen = document.getElementById('fullscreen');
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = this.input.value;
      this.remember(token);
      onToken(token);
    });
    this.retry.addEventListener('click', () => onRetry());
    if (document.fullscreenEnabled) {
      this.fullscreen.hidden = false;
      this.fullscreen.addEventListener('click', (ev) => {
        ev.stopPropagation();
        this.toggleFullscreen();
      });
      document.getElementById('video').addEventListener('dblclick', () => this.toggleFullscreen());
      addEventListener('keydown', (ev) => {
        if (ev.key === 'f' && ev.target === document.body) this.toggleFullscreen();
      });
      document.addEventListener('fullscreenchange', () => {
        this.fullscreen.textContent = document.fullscreenElement ? 'exit fullscreen' : 'fullscreen';
      });
    }
  }

  toggleFullscreen() {
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    else this.stage.requestFullscreen().catch(() => {});
  }

  // The token for this tab; a token= in the address bar would win over it
  // at the next load, so it leaves the URL (and the history entry).
  remember(token) {
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      // not remembered: this page still uses it until it is closed
    }
    const url = new URL(location.href);
    if (url.searchParams.has('token')) {
      url.searchParams.delete('token');
      history.replaceState(null, '', url);
    }
  }

  // Streaming: the notice goes away.
  hide() {
    this.notice.hidden = true;
  }

  // A message, with what the user can do: 'token' (the token field),
  // 'retry' (a "retry now" button) or nothing.
  show(message, action = null) {
    this.notice.hidden = false;
    this.notice.dataset.action = action ?? '';
    if (this.text.textContent !== message) this.text.textContent = message;
    const asking = action === 'token';
    if (asking && this.form.hidden) {
      this.form.hidden = false;
      this.input.focus();
    }
    this.form.hidden = !asking;
    this.retry.hidden = action !== 'retry';
  }
}
