// SPDX-License-Identifier: MIT
// The lab's pixel timecode in a page: the layout and check word of
// codec/pps-timecode.c (frame index 32 bits, capture time in us 64 bits,
// CRC-16/CCITT 16 bits, as a 14 x 8 grid of 16 px blocks in the top-left
// corner of a 640x480 picture, black for 0 and white for 1), drawn on a
// canvas and read back from one.
"use strict";

const PPS_TC_COLS = 14;
const PPS_TC_ROWS = 8;
const PPS_TC_BLOCK = 16;

function ppsTcCrc16(bytes, len) {
  let crc = 0xffff;
  for (let i = 0; i < len; i++) {
    crc ^= bytes[i] << 8;
    for (let k = 0; k < 8; k++)
      crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
  }
  return crc;
}

// Draws the stamp of (frameIndex, captureUs) with 2D context @ctx.
function ppsTcStamp(ctx, frameIndex, captureUs) {
  const bytes = new Uint8Array(14);
  const t = BigInt(captureUs);
  for (let i = 0; i < 4; i++)
    bytes[i] = (frameIndex >>> (24 - 8 * i)) & 0xff;
  for (let i = 0; i < 8; i++)
    bytes[4 + i] = Number((t >> BigInt(56 - 8 * i)) & 0xffn);
  const crc = ppsTcCrc16(bytes, 12);
  bytes[12] = crc >> 8;
  bytes[13] = crc & 0xff;
  for (let bit = 0; bit < PPS_TC_COLS * PPS_TC_ROWS; bit++) {
    ctx.fillStyle = (bytes[bit >> 3] >> (7 - (bit & 7))) & 1 ? "#fff" : "#000";
    ctx.fillRect((bit % PPS_TC_COLS) * PPS_TC_BLOCK, Math.floor(bit / PPS_TC_COLS) * PPS_TC_BLOCK,
                 PPS_TC_BLOCK, PPS_TC_BLOCK);
  }
}

// Reads a stamp from RGBA @data of a (14 x 16) x (8 x 16) px area scaled
// to the 640x480 picture's geometry: {frameIndex, captureUs}, or null when
// there is none or the check word fails. As pps_timecode_read(), only the
// centre half of each block counts; full-range RGB, so the threshold is the
// middle of 0..255 (the middle of 16..235 in the C reader's luma).
function ppsTcRead(data, width) {
  const q = PPS_TC_BLOCK / 4;
  const bytes = new Uint8Array(14);
  for (let bit = 0; bit < PPS_TC_COLS * PPS_TC_ROWS; bit++) {
    const x0 = (bit % PPS_TC_COLS) * PPS_TC_BLOCK + q, y0 = Math.floor(bit / PPS_TC_COLS) * PPS_TC_BLOCK + q;
    let sum = 0, n = 0;
    for (let y = y0; y < y0 + PPS_TC_BLOCK - 2 * q; y++)
      for (let x = x0; x < x0 + PPS_TC_BLOCK - 2 * q; x++, n++) {
        const p = (y * width + x) * 4;
        sum += data[p] + data[p + 1] + data[p + 2];
      }
    if (sum / (3 * n) > 127.5)
      bytes[bit >> 3] |= 1 << (7 - (bit & 7));
  }
  if (ppsTcCrc16(bytes, 12) !== (bytes[12] << 8 | bytes[13]))
    return null;
  let index = 0, t = 0n;
  for (let i = 0; i < 4; i++)
    index = index * 256 + bytes[i];
  for (let i = 0; i < 8; i++)
    t = (t << 8n) | BigInt(bytes[4 + i]);
  return {frameIndex: index, captureUs: Number(t)};
}

// CLOCK_REALTIME in us, as the other systems' timecodes and logs carry it
// (both namespaces share the clock).
function ppsNowUs() {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}
