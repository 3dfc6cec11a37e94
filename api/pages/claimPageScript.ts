/**
 * The claim page's only script, inline under the response's nonce (no file to fetch, no
 * framework). It shows the copy buttons (hidden without JavaScript), copies on click, and
 * while the claim can still move listens to the claim's event stream (GET
 * /api/claims/{id}/events, docs/events.md#live-streams): each event makes it ask GET
 * /api/claims/{id} (the stream replays the claim's past first, so an event alone does not say
 * the claim is elsewhere now); when the status differs from the one on the page it reloads it,
 * so the server renders every state and the script writes no HTML at all (the page's Trusted
 * Types policy forbids it). A browser without EventSource asks every few seconds instead.
 */

import { FINAL_CLAIM_STATUSES } from "../schemas/claimStatus.ts";

/** How often a browser without EventSource asks for the claim's status. */
export const CLAIM_POLL_MS = 2_000;

export const CLAIM_PAGE_SCRIPT = `"use strict";
(() => {
  const root = document.getElementById("claim");
  if (!root) return;
  const shown = root.dataset.status;
  for (const button of document.querySelectorAll("button[data-copy]")) button.hidden = false;
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-copy]") : null;
    const source = button && document.getElementById(button.dataset.copy);
    if (!source) return;
    // The button's first span is its visible word; the rest names what it copies.
    const word = button.firstElementChild;
    const say = (text) => {
      word.textContent = text;
      setTimeout(() => { word.textContent = "Copy"; }, 2000);
    };
    const copied = navigator.clipboard
      ? navigator.clipboard.writeText(source.textContent.trim())
      : Promise.reject(new Error("no clipboard"));
    copied.then(() => say("Copied"), () => {
      getSelection().selectAllChildren(source);
      say("Selected");
    });
  });
  if (${JSON.stringify(FINAL_CLAIM_STATUSES)}.includes(shown)) return;
  const live = document.getElementById("live-status");
  const tell = (text) => { if (live) live.textContent = text; };
  tell("This page updates itself when the claim moves.");
  const url = "/api/claims/" + encodeURIComponent(root.dataset.claimId);
  const check = async () => {
    try {
      const response = await fetch(url, { headers: { accept: "application/json" }, cache: "no-store" });
      if (response.ok) {
        const claim = await response.json();
        if (claim.status !== shown) return location.reload();
        tell("This page updates itself when the claim moves (last checked " + new Date().toLocaleTimeString() + ").");
      }
    } catch {
      // Offline for a moment: the next event, or tick, asks again.
    }
  };
  if (typeof EventSource === "function") {
    const events = new EventSource(url + "/events");
    const types = ["claim.created", "claim.paid", "claim.paying", "claim.completed", "claim.expired", "claim.failed"];
    for (const type of types) events.addEventListener(type, check);
    return;
  }
  const poll = async () => {
    if (!document.hidden) await check();
    setTimeout(poll, ${CLAIM_POLL_MS});
  };
  setTimeout(poll, ${CLAIM_POLL_MS});
})();
`;
