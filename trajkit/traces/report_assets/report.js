/* trajkit report: lazy rendering, search and filters for the trace viewer.
   Trace text only ever lives in escaped HTML and inert <template> elements; this script clones those
   templates and reads textContent for searching. It never evaluates or parses trace text. */
(function () {
  "use strict";
  var list = document.getElementById("trace-list");
  if (!list) { return; }
  var items = Array.prototype.slice.call(list.querySelectorAll("details.trace"));
  var search = document.getElementById("trace-search");
  var onlyFailed = document.getElementById("only-failed");
  var onlyMalformed = document.getElementById("only-malformed");
  var shown = document.getElementById("trace-shown");
  var noMatch = document.getElementById("no-match");
  var haystacks = new WeakMap();

  function child(el, selector) {
    for (var i = 0; i < el.children.length; i++) {
      if (el.children[i].matches(selector)) { return el.children[i]; }
    }
    return null;
  }

  function fillTrace(det) {
    var body = child(det, ".t-body");
    var tpl = child(det, "template");
    if (body && tpl && !body.hasChildNodes()) { body.appendChild(tpl.content.cloneNode(true)); }
  }

  function fillSystem(det) {
    var body = child(det, ".sys-body");
    var tpl = document.getElementById("sys-" + det.getAttribute("data-sys"));
    if (body && tpl && !body.hasChildNodes()) { body.appendChild(tpl.content.cloneNode(true)); }
  }

  document.addEventListener("toggle", function (ev) {
    var det = ev.target;
    if (!det.open) { return; }
    if (det.classList.contains("trace")) { fillTrace(det); }
    else if (det.classList.contains("sys")) { fillSystem(det); }
  }, true);

  function haystack(det) {
    var text = haystacks.get(det);
    if (text === undefined) {
      var tpl = child(det, "template");
      text = (det.getAttribute("data-q") + "\n" + (tpl ? tpl.content.textContent : "")).toLowerCase();
      haystacks.set(det, text);
    }
    return text;
  }

  function apply() {
    var terms = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    var count = 0;
    items.forEach(function (det) {
      var ok = (!onlyFailed.checked || det.getAttribute("data-failed") === "1") &&
               (!onlyMalformed.checked || det.getAttribute("data-malformed") === "1");
      if (ok && terms.length) {
        var text = haystack(det);
        ok = terms.every(function (t) { return text.indexOf(t) >= 0; });
      }
      det.hidden = !ok;
      if (ok) { count++; }
    });
    shown.textContent = count.toLocaleString("en-US") + " of " + items.length.toLocaleString("en-US") + " traces";
    noMatch.hidden = count > 0;
    list.setAttribute("data-applied", search.value);
  }

  var timer = 0;
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 120); });
  search.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { clearTimeout(timer); apply(); } });
  onlyFailed.addEventListener("change", apply);
  onlyMalformed.addEventListener("change", apply);
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "/" && document.activeElement !== search) { ev.preventDefault(); search.focus(); }
  });
})();
