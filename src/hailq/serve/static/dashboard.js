// hailq dashboard: the buttons that call the JSON API, and live pages (the overview's
// charts are in overview.js).
// No framework, no build step, nothing fetched from anywhere but this server.
"use strict";

(function () {
  const body = document.body;
  const refresh = Math.max(1, Number(body.dataset.refresh || 3)) * 1000;

  // -- messages to the operator ----------------------------------------------------------
  function toast(text, isError) {
    const el = document.getElementById("toast");
    if (!el) return;
    el.textContent = text;
    el.className = "toast" + (isError ? " error" : "");
    el.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { el.hidden = true; }, isError ? 8000 : 4000);
  }

  function fmt(n) { return Number(n).toLocaleString("en-US"); }

  // -- the JSON API ----------------------------------------------------------------------
  async function api(method, path, payload) {
    const response = await fetch(path, {
      method: method,
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: payload === undefined ? undefined : JSON.stringify(payload),
      credentials: "same-origin",
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const message = data && data.error ? data.error.message : response.statusText;
      throw new Error(message || ("HTTP " + response.status));
    }
    return data;
  }

  function queuePath(queue) { return "/api/queues/" + encodeURIComponent(queue); }

  const ACTIONS = {
    pause: async (b) => {
      await api("POST", queuePath(b.dataset.queue) + "/pause", {});
      return "Paused " + b.dataset.queue + ": workers get nothing from it until resumed.";
    },
    resume: async (b) => {
      await api("POST", queuePath(b.dataset.queue) + "/resume", {});
      return "Resumed " + b.dataset.queue + ".";
    },
    "redrive-one": async (b) => {
      const r = await api("POST", queuePath(b.dataset.queue) + "/dead/redrive", { ids: [b.dataset.id] });
      return "Redrove " + fmt(r.redriven) + " message.";
    },
    "delete-one": async (b) => {
      if (!window.confirm("Delete dead letter " + b.dataset.id + " for good?")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/dead/delete", { ids: [b.dataset.id] });
      return "Deleted " + fmt(r.deleted) + " message.";
    },
    "purge-live": async (b) => {
      if (!window.confirm("Delete every live message of " + b.dataset.queue + " (" + b.dataset.count
                          + " now: ready, delayed, in flight and blocked)? Dead letters stay.")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/purge", {});
      return "Purged " + fmt(r.purged) + " messages.";
    },
    "purge-dead": async (b) => {
      if (!window.confirm("Delete every dead letter of " + b.dataset.queue + " (" + b.dataset.count
                          + ") for good?")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/purge", { dead: true });
      return "Purged " + fmt(r.purged) + " dead letters.";
    },
    // Any other API call a page offers: data-method, data-path, data-body (JSON),
    // data-confirm (asked first), data-done (said after), data-then (where to go next).
    call: async (b) => {
      if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return null;
      await api(b.dataset.method, b.dataset.path,
                b.dataset.body ? JSON.parse(b.dataset.body) : undefined);
      return b.dataset.done || "Done.";
    },
    "redrive-matching": async () => bulk("redrive", "Redrive", "redriven"),
    "delete-matching": async () => bulk("delete", "Delete for good", "deleted"),
  };

  // A bulk action runs on the server over every match of the filter (up to its limit),
  // after the operator confirmed the number the page counted.
  async function bulk(verb, label, field) {
    const box = document.getElementById("bulk");
    const n = Number(box.dataset.count);
    const filter = JSON.parse(box.dataset.filter);
    const what = [];
    if (filter.error) what.push("error contains \u201c" + filter.error + "\u201d");
    if (filter.older_than) what.push("dead for longer than " + filter.older_than + " s");
    if (filter.ordering_key) what.push("ordering key \u201c" + filter.ordering_key + "\u201d");
    const question = label + " " + fmt(n) + " dead letter" + (n === 1 ? "" : "s") + " of "
      + box.dataset.queue + (what.length ? " matching " + what.join(" and ") : "") + "?";
    if (!window.confirm(question)) return null;
    const r = await api("POST", queuePath(box.dataset.queue) + "/dead/" + verb, filter);
    return (verb === "redrive" ? "Redrove " : "Deleted ") + fmt(r[field]) + " dead letter"
      + (r[field] === 1 ? "" : "s") + ".";
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || !ACTIONS[button.dataset.action]) return;
    button.disabled = true;
    try {
      const done = await ACTIONS[button.dataset.action](button);
      if (done) {
        toast(done, false);
        sessionStorage.setItem("hailq-toast", done);
        const next = button.dataset.then;
        setTimeout(() => { if (next) window.location.assign(next); else window.location.reload(); }, 300);
      }
    } catch (error) {
      toast(error.message, true);
    } finally {
      button.disabled = false;
    }
  });

  // An operator's override of a queue's settings: the filled fields only.
  const configure = document.getElementById("configure");
  if (configure) {
    configure.addEventListener("submit", async (event) => {
      event.preventDefault();
      const changes = {};
      for (const input of configure.querySelectorAll("input")) {
        const value = input.value.trim();
        if (value === "") continue;
        changes[input.name] = input.name === "rate" ? value : Number(value);
      }
      if (Object.keys(changes).length === 0) { toast("Fill in a setting to override.", true); return; }
      try {
        await api("PATCH", queuePath(configure.dataset.queue), changes);
        const done = "Overrode " + Object.keys(changes).join(", ") + ".";
        sessionStorage.setItem("hailq-toast", done);
        window.location.reload();
      } catch (error) {
        toast(error.message, true);
      }
    });
  }

  const left = sessionStorage.getItem("hailq-toast");
  if (left) { sessionStorage.removeItem("hailq-toast"); toast(left, false); }

  // -- hiding payloads -------------------------------------------------------------------
  const toggle = document.getElementById("payloads");
  if (toggle) {
    toggle.addEventListener("click", () => {
      const hide = body.dataset.payloads !== "hidden";
      document.cookie = "hailq_payloads=" + (hide ? "hidden" : "shown")
        + "; path=/; max-age=31536000; samesite=strict";
      window.location.reload();
    });
  }

  // -- live pages ------------------------------------------------------------------------
  // Polls while the tab is visible: ``every(fn)`` runs fn each refresh period, shows
  // "live" (or why not) in the header, and stops while the tab is hidden.
  const live = document.getElementById("live");
  function showLive(on) {
    live.hidden = false;
    live.className = "live " + (on ? "on" : "off");
    live.textContent = on ? "live \u00b7 every " + refresh / 1000 + "s" : "paused while hidden";
  }

  function every(fn) {
    let busy = false;
    async function tick() {
      if (document.visibilityState !== "visible" || busy) return;
      busy = true;
      try {
        await fn();
        if (live.className.indexOf("off") >= 0) showLive(true);
      } catch (error) {
        live.className = "live off";
        live.textContent = "not updating: " + error.message;
      } finally {
        busy = false;
      }
    }
    showLive(document.visibilityState === "visible");
    setInterval(tick, refresh);
    document.addEventListener("visibilitychange", () => {
      const on = document.visibilityState === "visible";
      showLive(on);
      if (on) tick();
    });
  }

  // A server-rendered page stays live: its parts marked data-live (each with an id) are
  // fetched again and swapped, values and highlights as the server renders them. A part
  // the operator is using (a body or a traceback opened, a field being typed in) waits
  // for the next round; a clicked button or summary does not hold it, nor a details the
  // server opens itself (data-auto), which stays closed once the operator closed it.
  async function refreshParts() {
    const response = await fetch(window.location.href, {
      headers: { "Accept": "text/html" }, credentials: "same-origin", cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    const focused = document.activeElement;
    const typing = focused && focused.matches("input, select, textarea") ? focused : null;
    for (const part of document.querySelectorAll("[data-live][id]")) {
      if (part.querySelector("details[open]:not([data-auto])")
          || (typing && part.contains(typing))) continue;
      const next = fresh.getElementById(part.id);
      if (!next || next.outerHTML === part.outerHTML) continue;
      const node = document.importNode(next, true);
      if (part.querySelector("details[data-auto]:not([open])")) {
        for (const d of node.querySelectorAll("details[data-auto]")) d.open = false;
      }
      part.replaceWith(node);
    }
    document.dispatchEvent(new Event("hailq:refreshed"));
  }

  window.hailq = { api: api, toast: toast, fmt: fmt, every: every };
  if (document.querySelector("[data-live][id]")) every(refreshParts);
})();
