// SPDX-License-Identifier: MIT
// What the WebRTC peer's two pages share.
"use strict";

// Resolves once ICE gathering is complete (the SDP then carries every
// candidate: no trickle, since SDP goes through files), or after 10 s.
function ppsGatheringComplete(pc) {
  if (pc.iceGatheringState === "complete")
    return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 10000);
    pc.addEventListener("icegatheringstatechange", () => {
      if (pc.iceGatheringState === "complete") {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}
