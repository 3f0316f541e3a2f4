/*
 * Cortex UI behaviour — small, dependency-free, CSP-safe (no inline script, no eval).
 *
 * Loaded synchronously in <head> so the `js` class lands before first paint; everything
 * else is event delegation on `document`, so content swapped in by htmx works unchanged.
 *
 *   /                        focus the global search ([data-global-search]) unless typing
 *   Esc                      close an open menu or dialog, else leave the current field
 *   [data-copy-target="#id"] copy that element's value/text;  [data-copy-text="…"] copy the text
 *   form[data-confirm] / button[data-confirm]
 *                            ask in #confirm-dialog first (data-confirm-title, data-confirm-label,
 *                            data-confirm-variant="primary" for non-destructive actions)
 *   select[data-autosubmit]  submit its form on change (the no-JS button stays for keyboards)
 *   time[datetime][data-relative]  "3 days ago", absolute date in the title
 *   [data-dismiss]           remove the closest [data-dismissible] (flash messages, toasts)
 *   [data-dialog-open="#id"] / [data-dialog-close]   open / close a <dialog>
 *   [data-toast="…"]         show a toast (data-toast-level: success | error | info)
 *   Cortex.toast(message, level)   also fired by an htmx `HX-Trigger: {"toast": {...}}` header
 *   [data-page-search]       a page's own search box; `/` focuses it before the global one; ↓ moves to its results
 *   [data-keyboard-list]     a result list: j / k move focus through its .item-title links, Enter opens one
 *   [data-md-mode="write|preview"]  Markdown editor toggle inside .markdown-field (preview via htmx)
 *   form[data-upload]        one request per file with its own progress bar and outcome (JSON);
 *                            data-max-bytes / data-accept refuse wrong files before sending
 *   input[data-new-secret]   selected on load, so a just-created token is ready to copy
 *   details[data-collapse-on-phone]  closed on load at phone widths
 */
(function () {
  "use strict";

  var root = document.documentElement;
  root.classList.remove("no-js");
  root.classList.add("js");

  function ready(fn) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn);
    else fn();
  }

  function isTyping(el) {
    if (!el || el === document.body) return false;
    if (el.isContentEditable) return true;
    var tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag !== "INPUT") return false;
    return !/^(button|submit|reset|checkbox|radio|range|color|file|image)$/i.test(el.type);
  }

  // Screen-reader announcements through the polite live region in base.html.
  function announce(text) {
    var live = document.getElementById("sr-live");
    if (!live) return;
    live.textContent = "";
    window.setTimeout(function () { live.textContent = text; }, 50);
  }

  function icon(paths) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", "16");
    svg.setAttribute("height", "16");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("fill", "none");
    svg.setAttribute("stroke", "currentColor");
    svg.setAttribute("stroke-width", "1.75");
    svg.setAttribute("stroke-linecap", "round");
    svg.setAttribute("stroke-linejoin", "round");
    svg.setAttribute("aria-hidden", "true");
    paths.forEach(function (d) {
      var p = document.createElementNS(ns, "path");
      p.setAttribute("d", d);
      svg.appendChild(p);
    });
    return svg;
  }
  var ICONS = {
    success: ["M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z", "m8.5 12.25 2.5 2.5 4.5-5"],
    error: ["M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z", "M12 7.5v5.5", "M12 16.25h.01"],
    info: ["M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z", "M12 11v5.5", "M12 7.75h.01"],
    close: ["M6.5 6.5l11 11M17.5 6.5l-11 11"]
  };

  // --- removal with a short exit animation ------------------------------------------------
  function dismiss(el) {
    if (!el || el.classList.contains("is-leaving")) return;
    el.classList.add("is-leaving");
    var reduce = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    window.setTimeout(function () { el.remove(); }, reduce ? 0 : 180);
  }

  // --- toasts -----------------------------------------------------------------------------
  function toast(message, level) {
    var region = document.querySelector("[data-toast-region]");
    if (!region || !message) return;
    level = level === "success" || level === "error" ? level : "info";
    var el = document.createElement("div");
    el.className = "toast toast-" + level;
    el.setAttribute("data-dismissible", "");
    el.setAttribute("role", level === "error" ? "alert" : "status");
    el.appendChild(icon(ICONS[level]));
    var text = document.createElement("span");
    text.className = "toast-message";
    text.textContent = message;
    el.appendChild(text);
    var close = document.createElement("button");
    close.type = "button";
    close.className = "alert-dismiss";
    close.setAttribute("data-dismiss", "");
    close.setAttribute("aria-label", "Dismiss");
    close.appendChild(icon(ICONS.close));
    el.appendChild(close);
    region.appendChild(el);
    var timer = window.setTimeout(function () { dismiss(el); }, level === "error" ? 8000 : 4000);
    el.addEventListener("mouseenter", function () { window.clearTimeout(timer); });
    el.addEventListener("mouseleave", function () { timer = window.setTimeout(function () { dismiss(el); }, 2500); });
  }

  // --- copy to clipboard --------------------------------------------------------------------
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // Plain-http deployments: the old selection-based copy still works there.
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      area.remove();
      if (ok) resolve(); else reject(new Error("copy failed"));
    });
  }

  function copyFrom(button) {
    var text = button.getAttribute("data-copy-text");
    if (text === null) {
      var target = document.querySelector(button.getAttribute("data-copy-target"));
      if (!target) return;
      text = "value" in target && target.tagName !== "BUTTON" ? target.value : target.textContent;
    }
    copyText(text.replace(/\s+$/, "")).then(function () {
      button.classList.add("is-copied");
      var label = button.querySelector("[data-copy-label]");
      var before = label ? label.textContent : null;
      if (label) label.textContent = "Copied";
      announce("Copied to clipboard");
      window.clearTimeout(button._copyTimer);
      button._copyTimer = window.setTimeout(function () {
        button.classList.remove("is-copied");
        if (label && before !== null) label.textContent = before;
      }, 1800);
    }, function () {
      toast("Could not copy — select the text and copy it by hand.", "error");
    });
  }

  // --- confirm dialog ---------------------------------------------------------------------------
  function confirmWith(source, fallbackSource) {
    var get = function (name) {
      return source.getAttribute(name) || (fallbackSource && fallbackSource.getAttribute(name)) || "";
    };
    var message = get("data-confirm");
    var dialog = document.getElementById("confirm-dialog");
    if (!dialog || typeof dialog.showModal !== "function") {
      return Promise.resolve(window.confirm(message));
    }
    dialog.querySelector("[data-confirm-message]").textContent = message;
    dialog.querySelector("[data-confirm-title]").textContent = get("data-confirm-title") || "Are you sure?";
    var accept = dialog.querySelector("[data-confirm-accept]");
    accept.textContent = get("data-confirm-label") || "Confirm";
    var primary = get("data-confirm-variant") === "primary";
    accept.className = "btn " + (primary ? "btn-primary" : "btn-danger-solid");
    dialog.querySelector("[data-confirm-icon]").classList.toggle("dialog-icon-accent", primary);
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise(function (resolve) {
      dialog.addEventListener("close", function onClose() {
        dialog.removeEventListener("close", onClose);
        resolve(dialog.returnValue === "confirm");
      });
    });
  }

  function isHtmxDriven(el) {
    return ["hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete"].some(function (a) { return el.hasAttribute(a); });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter || null;
    var source = submitter && submitter.hasAttribute("data-confirm") ? submitter : form;
    if (!source.hasAttribute("data-confirm") || form.hasAttribute("data-confirmed")) return;
    if (isHtmxDriven(form) || (submitter && isHtmxDriven(submitter))) return; // see htmx:confirm below
    event.preventDefault();
    confirmWith(source, form).then(function (ok) {
      if (!ok) return;
      form.setAttribute("data-confirmed", "");
      try {
        if (form.requestSubmit) form.requestSubmit(submitter || undefined);
        else form.submit();
      } finally {
        form.removeAttribute("data-confirmed");
      }
    });
  }, true);

  // htmx asks before each request; answer with our dialog when the element wants confirmation.
  document.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail.elt;
    var trigger = event.detail.triggeringEvent;
    var submitter = trigger && trigger.submitter;
    var source = submitter && submitter.hasAttribute("data-confirm") ? submitter : elt;
    if (!source || !source.hasAttribute || !source.hasAttribute("data-confirm")) return;
    event.preventDefault();
    confirmWith(source, elt).then(function (ok) { if (ok) event.detail.issueRequest(true); });
  });

  // --- relative time -------------------------------------------------------------------------------
  var rtf = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  var absoluteFormat = window.Intl ? new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }) : null;
  var UNITS = [
    ["year", 365 * 24 * 3600], ["month", 30 * 24 * 3600], ["week", 7 * 24 * 3600],
    ["day", 24 * 3600], ["hour", 3600], ["minute", 60]
  ];

  function relative(date, now) {
    var seconds = (date.getTime() - now) / 1000;
    var abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    for (var i = 0; i < UNITS.length; i++) {
      var unit = UNITS[i];
      if (abs >= unit[1] || unit[0] === "minute") {
        var value = Math.round(seconds / unit[1]);
        if (value === 0) value = seconds < 0 ? -1 : 1;
        return rtf ? rtf.format(value, unit[0]) : Math.abs(value) + " " + unit[0] + (Math.abs(value) === 1 ? "" : "s") + (value < 0 ? " ago" : " from now");
      }
    }
    return "";
  }

  function renderTimes(scope) {
    var now = Date.now();
    (scope || document).querySelectorAll("time[datetime][data-relative]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) return;
      el.textContent = relative(date, now);
      if (absoluteFormat) el.title = absoluteFormat.format(date);
    });
  }

  // --- menus and dialogs ----------------------------------------------------------------------------
  function closeMenus(except) {
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      if (menu !== except) menu.removeAttribute("open");
    });
  }

  document.addEventListener("toggle", function (event) {
    var el = event.target;
    if (el.matches && el.matches("details.menu") && el.open) closeMenus(el);
  }, true);

  // --- one click handler for every data-* behaviour ---------------------------------------------------
  document.addEventListener("click", function (event) {
    var t = event.target;
    if (!(t instanceof Element)) return;
    if (!t.closest("details.menu")) closeMenus(null);

    var copy = t.closest("[data-copy-target], [data-copy-text]");
    if (copy) { event.preventDefault(); copyFrom(copy); return; }

    var dismissBtn = t.closest("[data-dismiss]");
    if (dismissBtn) { dismiss(dismissBtn.closest("[data-dismissible]")); return; }

    var opener = t.closest("[data-dialog-open]");
    if (opener) {
      var dlg = document.querySelector(opener.getAttribute("data-dialog-open"));
      if (dlg && dlg.showModal) { event.preventDefault(); dlg.showModal(); }
      return;
    }

    var closer = t.closest("[data-dialog-close]");
    if (closer) { var d = closer.closest("dialog"); if (d) d.close(""); return; }

    var toaster = t.closest("[data-toast]");
    if (toaster) { toast(toaster.getAttribute("data-toast"), toaster.getAttribute("data-toast-level")); return; }

    // A click on a modal's backdrop lands on the <dialog> itself, outside its box: close it.
    if (t.tagName === "DIALOG" && t.open) {
      var r = t.getBoundingClientRect();
      var inside = event.clientX >= r.left && event.clientX <= r.right && event.clientY >= r.top && event.clientY <= r.bottom;
      if (!inside) t.close("");
      return;
    }
  });

  // --- keyboard ----------------------------------------------------------------------------------------
  // Result lists marked [data-keyboard-list]: j / k (or ↓ from the page's search box) move focus from
  // one result's title link to the next; Enter then follows the focused link, as links do.
  function resultLinks() {
    var list = document.querySelector("[data-keyboard-list]");
    return list ? Array.prototype.slice.call(list.querySelectorAll(".item-title")) : [];
  }
  function moveThroughResults(step) {
    var links = resultLinks();
    if (!links.length) return false;
    var at = links.indexOf(document.activeElement);
    var next = at === -1 ? (step > 0 ? 0 : links.length - 1) : Math.min(Math.max(at + step, 0), links.length - 1);
    links[next].focus();
    links[next].scrollIntoView({ block: "nearest" });
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented) return;
    var plain = !event.ctrlKey && !event.metaKey && !event.altKey;
    if (plain && (event.key === "j" || event.key === "k") && !isTyping(event.target)) {
      if (moveThroughResults(event.key === "j" ? 1 : -1)) event.preventDefault();
      return;
    }
    if (plain && event.key === "ArrowDown" && event.target.matches && event.target.matches("[data-page-search]")) {
      if (moveThroughResults(1)) event.preventDefault();
      return;
    }
    if (event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !isTyping(event.target)) {
      var search = document.querySelector("[data-page-search]") || document.querySelector("[data-global-search]");
      if (search) {
        event.preventDefault();
        search.focus();
        search.select();
      }
      return;
    }
    if (event.key === "Escape") {
      var menu = document.querySelector("details.menu[open]");
      if (menu) {
        menu.removeAttribute("open");
        var summary = menu.querySelector("summary");
        if (summary) summary.focus();
        return;
      }
      var dialog = document.querySelector("dialog[open]");
      if (dialog) {
        // Modal dialogs close natively; non-modal ones (dialog.show()) need a hand.
        if (!dialog.matches(":modal")) dialog.close("");
        return;
      }
      if (isTyping(document.activeElement)) document.activeElement.blur();
    }
  });

  // --- auto-submit (organization switcher) ------------------------------------------------------------------
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.matches && el.matches("select[data-autosubmit]") && el.form) {
      if (el.form.requestSubmit) el.form.requestSubmit(); else el.form.submit();
    }
  });

  // --- htmx integration --------------------------------------------------------------------------------------
  var inFlight = 0;
  document.addEventListener("htmx:beforeRequest", function () { inFlight += 1; root.classList.add("is-busy"); });
  document.addEventListener("htmx:afterRequest", function () {
    inFlight = Math.max(0, inFlight - 1);
    if (inFlight === 0) root.classList.remove("is-busy");
  });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    var text = status === 403 || status === 404 ? "That is no longer available." : "Something went wrong (" + status + "). Please try again.";
    toast(text, "error");
  });
  document.addEventListener("htmx:sendError", function () { toast("Cannot reach Cortex. Check your connection.", "error"); });
  document.addEventListener("htmx:load", function (event) { renderTimes(event.target); });
  // HX-Trigger: {"toast": {"message": "Saved", "level": "success"}}  or  HX-Trigger: {"toast": "Saved"}
  document.addEventListener("toast", function (event) {
    var d = event.detail || {};
    toast(d.message || d.value || "", d.level);
  });

  ready(function () {
    renderTimes(document);
    window.setInterval(function () { renderTimes(document); }, 60 * 1000);
  });

  // --- Markdown editor: Write / Preview ---------------------------------------------------------------
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("[data-md-mode]") : null;
    if (!button) return;
    var field = button.closest(".markdown-field");
    if (!field) return;
    var preview = button.getAttribute("data-md-mode") === "preview";
    var source = field.querySelector("textarea");
    var pane = field.querySelector(".markdown-preview");
    field.querySelectorAll("[data-md-mode]").forEach(function (b) { b.setAttribute("aria-pressed", String(b === button)); });
    if (source) source.hidden = preview;
    if (pane) {
      pane.hidden = !preview;
      if (preview && !pane.textContent.trim()) pane.textContent = "Rendering…";
    }
    if (!preview && source) source.focus();
  });

  // --- uploads: one request per file, each with progress and its own outcome -------------------------------
  function humanSize(bytes) {
    if (bytes < 1024) return bytes + " bytes";
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(0) + " KB";
    return (bytes / 1024 / 1024).toFixed(1) + " MB";
  }

  function uploadRow(list, file) {
    var row = document.createElement("li");
    row.className = "upload-item is-pending";
    var name = document.createElement("span");
    name.className = "upload-name";
    var label = document.createElement("span");
    label.className = "truncate";
    label.textContent = file.name;
    name.appendChild(label);
    var status = document.createElement("span");
    status.className = "upload-status";
    status.textContent = "Waiting…";
    var progress = document.createElement("div");
    progress.className = "progress";
    progress.setAttribute("role", "progressbar");
    progress.setAttribute("aria-label", "Uploading " + file.name);
    progress.setAttribute("aria-valuemin", "0");
    progress.setAttribute("aria-valuemax", "100");
    progress.setAttribute("aria-valuenow", "0");
    var bar = document.createElement("div");
    bar.className = "progress-bar";
    progress.appendChild(bar);
    row.appendChild(name);
    row.appendChild(status);
    row.appendChild(progress);
    list.appendChild(row);
    return row;
  }

  function setProgress(row, percent, text) {
    var progress = row.querySelector(".progress");
    progress.setAttribute("aria-valuenow", String(Math.round(percent)));
    row.querySelector(".progress-bar").style.setProperty("--value", percent + "%");
    if (text) row.querySelector(".upload-status").textContent = text;
  }

  function finishRow(row, ok, message, url) {
    row.classList.remove("is-pending");
    row.classList.add(ok ? "is-done" : "is-failed");
    row.setAttribute("data-upload-outcome", ok ? "ok" : "failed");
    var status = row.querySelector(".upload-status");
    status.textContent = "";
    if (ok && url) {
      var link = document.createElement("a");
      link.href = url;
      link.textContent = message;
      status.appendChild(link);
    } else {
      status.textContent = message;
    }
  }

  function precheck(form, file) {
    var accept = (form.getAttribute("data-accept") || "").split(",").filter(Boolean);
    var max = parseInt(form.getAttribute("data-max-bytes") || "0", 10);
    var dot = file.name.lastIndexOf(".");
    var extension = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
    if (accept.length && accept.indexOf(extension) < 0) return file.name + ": only " + accept.join(", ") + " files can be uploaded.";
    if (max && file.size > max) return file.name + " is " + humanSize(file.size) + "; the limit is " + humanSize(max) + ".";
    if (file.size === 0) return file.name + " is empty.";
    return "";
  }

  // The chosen files by name, each with its own scope and clearance (copies of the batch's selects,
  // starting at the batch's values). Without JavaScript the batch's choice applies to every file.
  function batchSelect(form, name) { return form.querySelector("select[name='" + name + "']"); }

  function choiceSelect(form, name, file, index, label) {
    var source = batchSelect(form, name);
    var wrap = document.createElement("span");
    wrap.className = "upload-choice";
    if (!source) return wrap;
    var select = source.cloneNode(true);
    select.removeAttribute("id");
    select.removeAttribute("aria-describedby");
    select.removeAttribute("required");
    select.name = "";
    select.id = "upload-" + name + "-" + index;
    select.className = "input-sm";
    select.value = source.value;
    select.setAttribute("data-choice", name);
    var caption = document.createElement("label");
    caption.htmlFor = select.id;
    caption.className = "visually-hidden";
    caption.textContent = label + " for " + file.name;
    wrap.appendChild(caption);
    wrap.appendChild(select);
    return wrap;
  }

  function renderChoices(form) {
    var box = form.querySelector("[data-upload-chosen]");
    var list = form.querySelector("[data-upload-choices]");
    var input = form.querySelector("input[type=file]");
    if (!box || !list || !input) return;
    var files = input.files ? Array.prototype.slice.call(input.files) : [];
    list.textContent = "";
    box.hidden = files.length === 0;
    files.forEach(function (file, index) {
      var row = document.createElement("li");
      row.className = "upload-item upload-choice-row";
      row.setAttribute("data-file-name", file.name);
      var name = document.createElement("span");
      name.className = "upload-name";
      var label = document.createElement("span");
      label.className = "truncate";
      label.textContent = file.name + " · " + humanSize(file.size);
      name.appendChild(label);
      row.appendChild(name);
      row.appendChild(choiceSelect(form, "scope", file, index, "Scope"));
      row.appendChild(choiceSelect(form, "clearance_min", file, index, "Minimum clearance"));
      list.appendChild(row);
    });
  }

  function choicesFor(form, index) {
    var row = form.querySelectorAll("[data-upload-choices] > li")[index];
    var pick = function (name) {
      var own = row && row.querySelector("select[data-choice='" + name + "']");
      var batch = batchSelect(form, name);
      return own ? own.value : (batch ? batch.value : "");
    };
    return { scope: pick("scope"), clearance_min: pick("clearance_min") };
  }

  document.addEventListener("change", function (event) {
    var el = event.target;
    var form = el instanceof Element ? el.closest("form[data-upload]") : null;
    if (!form) return;
    if (el instanceof HTMLInputElement && el.type === "file") { renderChoices(form); return; }
    if (!(el instanceof HTMLSelectElement)) return;
    if (el.hasAttribute("data-choice")) { el.setAttribute("data-touched", ""); return; }
    // A new batch choice reaches every file whose own choice nobody changed.
    form.querySelectorAll("select[data-choice='" + el.name + "']:not([data-touched])").forEach(function (own) {
      own.value = el.value;
    });
  });

  function sendFile(form, file, row, done, choice) {
    var data = new FormData(form);
    data.delete("files");
    data.append("files", file, file.name);
    if (choice && choice.scope) data.set("scope", choice.scope);
    if (choice && choice.clearance_min) data.set("clearance_min", choice.clearance_min);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) setProgress(row, (e.loaded / e.total) * 90, "Uploading… " + Math.round((e.loaded / e.total) * 100) + "%");
    });
    xhr.upload.addEventListener("load", function () { setProgress(row, 95, "Reading and indexing…"); });
    xhr.addEventListener("load", function () {
      var body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
      var result = body && body.results && body.results[0];
      if (result) finishRow(row, result.ok, result.message, result.url);
      else finishRow(row, false, (body && body.message) || "Upload failed (" + xhr.status + "). Try again.");
      done(Boolean(result && result.ok));
    });
    xhr.addEventListener("error", function () {
      finishRow(row, false, file.name + ": the network failed. Check your connection and retry.");
      done(false);
    });
    xhr.send(data);
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-upload") || !window.FormData) return;
    var input = form.querySelector("input[type=file]");
    var files = input && input.files ? Array.prototype.slice.call(input.files) : [];
    event.preventDefault();
    if (!files.length) { toast("Choose at least one file to upload.", "error"); return; }
    var list = form.querySelector("[data-upload-list]");
    var submit = form.querySelector("[data-upload-submit]");
    list.textContent = "";
    if (submit) submit.disabled = true;
    var queue = files.map(function (file, index) {
      return { file: file, choice: choicesFor(form, index), row: uploadRow(list, file) };
    });
    var saved = 0;
    var failed = 0;
    function next() {
      var item = queue.shift();
      if (!item) {
        if (submit) submit.disabled = false;
        input.value = "";
        renderChoices(form);
        var summary = saved + " saved" + (failed ? ", " + failed + " failed" : "");
        announce("Upload finished: " + summary);
        toast("Upload finished: " + summary, failed ? "error" : "success");
        return;
      }
      var problem = precheck(form, item.file);
      if (problem) { finishRow(item.row, false, problem); failed += 1; next(); return; }
      setProgress(item.row, 2, "Starting…");
      sendFile(form, item.file, item.row, function (ok) { if (ok) saved += 1; else failed += 1; next(); }, item.choice);
    }
    next();
  });

  // Drag files onto the drop zone.
  ["dragenter", "dragover"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var zone = event.target instanceof Element ? event.target.closest("[data-dropzone]") : null;
      if (!zone) return;
      event.preventDefault();
      zone.classList.add("is-over");
    });
  });
  ["dragleave", "drop"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var zone = event.target instanceof Element ? event.target.closest("[data-dropzone]") : null;
      if (!zone) return;
      zone.classList.remove("is-over");
      if (type === "drop" && event.dataTransfer && event.dataTransfer.files.length) {
        event.preventDefault();
        var input = zone.querySelector("input[type=file]");
        if (input) {
          input.files = event.dataTransfer.files;
          input.dispatchEvent(new Event("change", { bubbles: true }));
        }
      }
    });
  });

  // --- phone nav strip: say when more pages lie off to the right; show the current page's link ------------
  function navStrip() {
    var strip = document.querySelector(".sidebar");
    var more = strip && strip.querySelector("[data-nav-more]");
    if (!strip || !more) return;
    var update = function () {
      var scrollable = strip.scrollWidth - strip.clientWidth > 4;
      var atEnd = strip.scrollLeft + strip.clientWidth >= strip.scrollWidth - 4;
      more.hidden = !scrollable || atEnd;
    };
    var current = strip.querySelector("[aria-current=page]");
    if (current && strip.scrollWidth > strip.clientWidth) {
      var right = current.offsetLeft + current.offsetWidth;
      if (right > strip.clientWidth) strip.scrollLeft = right - strip.clientWidth + 48;
    }
    more.addEventListener("click", function () {
      strip.scrollBy({ left: Math.round(strip.clientWidth * 0.7), behavior: "smooth" });
    });
    strip.addEventListener("scroll", update, { passive: true });
    window.addEventListener("resize", update);
    update();
  }

  ready(function () {
    navStrip();
    // Filters fold away on a phone until asked for (they stay open when one is set).
    if (window.matchMedia && window.matchMedia("(max-width: 640px)").matches) {
      document.querySelectorAll("details[data-collapse-on-phone]").forEach(function (d) { d.open = false; });
    }
    var secret = document.querySelector("[data-new-secret]");
    if (secret) { secret.focus(); secret.select(); }
  });

  window.Cortex = { toast: toast, confirm: function (message) {
    var holder = document.createElement("span");
    holder.setAttribute("data-confirm", message);
    return confirmWith(holder);
  }, announce: announce, renderTimes: renderTimes };
})();
