// baton console live updates: every few seconds, fetch the current page as
// a fragment (only <main>'s content) and swap it in. It pauses while focus
// is inside <main> (so typing and keyboard position are never lost) or the
// tab is hidden,
// and stops after repeated failures. Without this script every page still
// works; it is a convenience, not a requirement.
(function () {
  "use strict";
  var INTERVAL = 5000;
  var failures = 0;
  var timer = null;
  var state = document.getElementById("live-state");
  var main = document.getElementById("main");
  if (!main || !window.fetch || !window.DOMParser) { return; }

  function say(text) { if (state) { state.textContent = text; } }

  // busy: focus is on something inside <main> (a field, a button, a link a
  // keyboard user tabbed to, a log being scrolled). Swapping <main> then
  // would lose the focus and what was typed, so the poll waits.
  function busy() {
    var a = document.activeElement;
    return !!a && a !== main && main.contains(a);
  }

  function textOf(root) {
    var c = root.cloneNode(true);
    c.querySelectorAll(".stamp").forEach(function (n) { n.remove(); });
    return c.textContent.replace(/\s+/g, " ");
  }

  function schedule() { timer = window.setTimeout(poll, INTERVAL); }

  function poll() {
    timer = null;
    if (document.hidden) { say("Live updates paused (tab hidden)."); schedule(); return; }
    if (busy()) { say("Live updates paused while focus is in the page (press Escape or click outside to resume)."); schedule(); return; }
    fetch(window.location.href, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (res) {
        return res.text().then(function (text) { return { ok: res.ok || res.status < 500, text: text }; });
      })
      .then(function (r) {
        if (!r.ok) { throw new Error("server error"); }
        var doc = new DOMParser().parseFromString("<main>" + r.text + "</main>", "text/html");
        var fresh = doc.querySelector("main");
        var changed = false;
        if (fresh && !busy()) {
          changed = textOf(fresh) !== textOf(main);
          var scrolls = [];
          main.querySelectorAll("pre").forEach(function (p) { scrolls.push(p.scrollTop); });
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
          main.querySelectorAll("pre").forEach(function (p, i) { if (i < scrolls.length) { p.scrollTop = scrolls[i]; } });
        }
        failures = 0;
        // Announce (aria-live) only when something besides the stamp
        // changed, so a screen reader is not interrupted every poll.
        if (changed) { say("Live: page changed at " + new Date().toLocaleTimeString() + "."); }
        else if (state && state.textContent.indexOf("Live") !== 0) { say("Live updates on."); }
        schedule();
      })
      .catch(function () {
        failures++;
        if (failures >= 5) { say("Live updates stopped: the console is not answering. Reload to retry."); return; }
        say("Live update failed; retrying.");
        schedule();
      });
  }

  // Escape hands focus back to <main> itself, which resumes the updates.
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && busy()) { main.focus(); }
  });

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null && failures < 5) { poll(); }
  });
  say("Live updates on (every " + INTERVAL / 1000 + "s).");
  schedule();
})();
