// korg-recall console: small, vanilla, optional. Every page works without this file; it adds
// live updates (server-sent events), keyboard shortcuts and the diff toggles. Stored text is only
// ever placed with textContent: nothing a memory or an event says is parsed as HTML here.
(function () {
  "use strict";
  var doc = document;
  doc.documentElement.classList.add("js");

  function $(selector, root) { return (root || doc).querySelector(selector); }
  function $all(selector, root) { return Array.prototype.slice.call((root || doc).querySelectorAll(selector)); }
  function el(tag, attrs, text) {
    var node = doc.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function isMemoryId(value) { return typeof value === "string" && /^m[a-z2-7]{10}$/.test(value); }
  function isRef(value) { return typeof value === "string" && /^e[0-9]{1,18}$/.test(value); }

  // --- keyboard shortcuts -------------------------------------------------------------------
  var pendingG = 0;
  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }
  function moveInList(step) {
    var items = $all("[data-item]");
    if (!items.length) { return; }
    var current = items.indexOf(doc.activeElement && doc.activeElement.closest ? doc.activeElement.closest("[data-item]") : null);
    var next = items[Math.max(0, Math.min(items.length - 1, current + step))];
    if (current === -1) { next = items[step > 0 ? 0 : items.length - 1]; }
    items.forEach(function (item) { item.removeAttribute("data-current"); });
    next.setAttribute("data-current", "");
    var link = $("a[href]", next);
    (link || next).focus();
  }
  doc.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var key = event.key;
    if (pendingG && Date.now() - pendingG < 1500) {
      pendingG = 0;
      var link = $('nav a[data-key="' + key + '"]');
      if (link) { event.preventDefault(); window.location.assign(link.getAttribute("href")); }
      return;
    }
    if (key === "g") { pendingG = Date.now(); return; }
    if (key === "/") {
      var search = $("[data-search]");
      if (search) { event.preventDefault(); search.focus(); search.select(); }
    } else if (key === "?") {
      var help = $("#shortcuts");
      if (help && typeof help.showModal === "function" && !help.open) { event.preventDefault(); help.showModal(); }
    } else if (key === "j") { event.preventDefault(); moveInList(1); }
    else if (key === "k") { event.preventDefault(); moveInList(-1); }
  });

  // --- diff toggles ---------------------------------------------------------------------------
  $all(".diff-box").forEach(function (box) {
    var diff = $(".diff", box);
    $all("[data-diff-show]", box).forEach(function (button) {
      button.addEventListener("click", function () {
        diff.setAttribute("data-diff", button.getAttribute("data-diff-show"));
        $all("[data-diff-show]", box).forEach(function (other) {
          other.setAttribute("aria-pressed", other === button ? "true" : "false");
        });
      });
    });
  });

  // --- purge: the button waits for the exact id ---------------------------------------------
  var confirmField = $("#purge-confirm");
  if (confirmField) {
    var purgeButton = $("button.danger", confirmField.form);
    var sync = function () { purgeButton.disabled = confirmField.value.trim() !== confirmField.getAttribute("pattern"); };
    confirmField.addEventListener("input", sync);
    sync();
  }

  // --- live updates -----------------------------------------------------------------------------
  var live = $("#live");
  var announced = [];
  function announce(text, href) {
    if (!live) { return; }
    announced.push([text, href]);
    if (announced.length > 3) { announced.shift(); }
    live.textContent = "";
    announced.forEach(function (pair) {
      var line = el("p");
      if (pair[1]) { line.appendChild(el("a", { href: pair[1] }, pair[0])); } else { line.textContent = pair[0]; }
      live.appendChild(line);
    });
  }
  function setPending(count) {
    if (typeof count !== "number" || count < 0) { return; }
    $all('[data-live="pending-count"]').forEach(function (badge) {
      badge.textContent = String(count);
      badge.classList.toggle("zero", count === 0);
    });
  }
  function memoryCard(m) {
    var item = el("li", { "class": "card arrived", "data-item": "", "data-id": m.id });
    var title = el("h3", { "class": "card-title" });
    var link = el("a", { href: "/memories/" + m.id });
    link.appendChild(el("bdi", {}, m.title || m.id));
    title.appendChild(link);
    item.appendChild(title);
    var meta = el("p", { "class": "meta" });
    meta.appendChild(el("code", {}, m.id));
    if (m.type) { meta.appendChild(el("span", { "class": "badge type" }, m.type)); }
    if (m.state) { meta.appendChild(el("span", { "class": "badge state-" + String(m.state).replace(/[^a-z]/g, "") }, m.state)); }
    if (m.trust === "untrusted") { meta.appendChild(el("span", { "class": "badge untrusted" }, "untrusted")); }
    if (m.scope) { meta.appendChild(el("span", { "class": "scope" }, m.scope)); }
    if (m.actor) { meta.appendChild(el("span", { "class": "actor" }, "by " + m.actor)); }
    meta.appendChild(el("span", { "class": "when" }, "just now"));
    item.appendChild(meta);
    return item;
  }
  function addMemory(m) {
    if (!m || !isMemoryId(m.id)) { return; }
    var page = doc.body.getAttribute("data-page");
    var listName = m.state === "pending" ? "pending" : m.state === "live" ? "memories" : null;
    var list = listName ? $('[data-live-list="' + listName + '"]') : null;
    var filtered = page === "memories" && window.location.search.replace(/^\?/, "") !== "";
    if (list && !filtered && !$('[data-id="' + m.id + '"]', list)) {
      list.insertBefore(memoryCard(m), list.firstChild);
      var empty = $("[data-live-empty]");
      if (empty) { empty.hidden = true; }
    }
    var what = m.state === "pending" ? "Waiting for approval: " : "New memory: ";
    announce(what + (m.title || m.id), "/memories/" + m.id);
  }
  function addEvents(data) {
    var count = typeof data.added === "number" ? data.added : 1;
    var href = isRef(data.newest) ? "/history/events/" + data.newest : null;
    announce(count + " new history event" + (count === 1 ? "" : "s") + " indexed", href);
  }
  var source = doc.body.getAttribute("data-events");
  if (source && typeof window.EventSource === "function") {
    var stream = new window.EventSource(source);
    var read = function (handler) {
      return function (message) {
        var data;
        try { data = JSON.parse(message.data); } catch (error) { return; }
        if (data && typeof data === "object") { handler(data); }
      };
    };
    stream.addEventListener("memory", read(function (data) {
      var found = Array.isArray(data.memories) ? data.memories.slice(0, 20) : [];
      found.reverse().forEach(addMemory);  // newest last, so it ends on top
    }));
    stream.addEventListener("pending", read(function (data) { setPending(data.count); }));
    stream.addEventListener("events", read(addEvents));
    stream.addEventListener("error", function () { /* the browser reconnects by itself */ });
    window.addEventListener("pagehide", function () { stream.close(); });
  }
})();
