// hcu view: filter and sort tables over their rows' data attributes, keep the state in the address (so a
// filtered view can be shared and survives reload), step through a trajectory with the keyboard, zoom a screen.
(function () {
  "use strict";

  function num(value) {
    return value === undefined || value === "" ? NaN : Number(value);
  }

  function readState() {
    return new URLSearchParams(location.hash.slice(1));
  }

  function writeState(state) {
    const text = state.toString();
    history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
  }

  function matches(row, control) {
    const wanted = control.value.trim();
    if (!wanted) return true;
    const value = row.dataset[control.dataset.filter] || "";
    switch (control.dataset.kind || "eq") {
      case "text": return value.toLowerCase().includes(wanted.toLowerCase());
      case "min": return num(value) >= Number(wanted);
      case "max": return num(value) <= Number(wanted);
      default: return value === wanted;
    }
  }

  function setupTable(table) {
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.forEach(function (row, i) { row.dataset.order = String(i); });
    const form = document.querySelector('form[data-for="' + table.id + '"]');
    const controls = form ? Array.from(form.querySelectorAll("[data-filter]")) : [];
    const counter = document.querySelector('[data-count-for="' + table.id + '"]');
    const heads = Array.from(table.tHead.rows[0].cells).filter(function (th) { return th.dataset.sort; });
    const owner = form !== null;  // the table whose state the address holds

    function filter() {
      let shown = 0, scored = 0, sum = 0;
      for (const row of rows) {
        const ok = controls.every(function (c) { return matches(row, c); });
        row.hidden = !ok;
        if (!ok) continue;
        shown += 1;
        const score = num(row.dataset.score);
        if (!isNaN(score)) { scored += 1; sum += score; }
      }
      if (counter) {
        counter.textContent = shown + " of " + rows.length + " shown" +
          (scored ? " · mean score " + (sum / scored).toFixed(3) + " over " + scored + " scored" : "");
      }
    }

    function sort(key, direction) {
      const head = heads.find(function (th) { return th.dataset.sort === key; });
      if (!head) return;
      const numeric = head.dataset.type === "num";
      const sign = direction === "desc" ? -1 : 1;
      const sorted = rows.slice().sort(function (a, b) {
        const x = a.dataset[key] || "", y = b.dataset[key] || "";
        if (x === "" || y === "") {  // empty values last, whatever the direction
          if (x === y) return Number(a.dataset.order) - Number(b.dataset.order);
          return x === "" ? 1 : -1;
        }
        const c = numeric ? num(x) - num(y) : x.localeCompare(y);
        return c !== 0 ? sign * c : Number(a.dataset.order) - Number(b.dataset.order);
      });
      for (const row of sorted) body.appendChild(row);
      heads.forEach(function (th) { th.classList.remove("asc", "desc"); });
      head.classList.add(direction);
    }

    function save() {
      if (!owner) return;
      const state = readState();
      controls.forEach(function (c) {
        if (c.value.trim()) state.set(c.name, c.value.trim()); else state.delete(c.name);
      });
      writeState(state);
    }

    heads.forEach(function (th) {
      th.addEventListener("click", function () {
        const direction = th.classList.contains("asc") ? "desc" : "asc";
        sort(th.dataset.sort, direction);
        if (owner) {
          const state = readState();
          state.set("sort", th.dataset.sort + ":" + direction);
          writeState(state);
        }
      });
    });
    if (form) {
      form.addEventListener("input", function () { filter(); save(); });
      form.addEventListener("change", function () { filter(); save(); });
      form.addEventListener("submit", function (event) { event.preventDefault(); });
      form.addEventListener("reset", function () {
        setTimeout(function () { filter(); writeState(new URLSearchParams()); }, 0);
      });
      const state = readState();
      controls.forEach(function (c) { if (state.has(c.name)) c.value = state.get(c.name); });
      const order = (state.get("sort") || "").split(":");
      if (order[0]) sort(order[0], order[1] === "desc" ? "desc" : "asc");
    }
    filter();
  }

  function setupSteps() {
    const steps = Array.from(document.querySelectorAll("article.step"));
    if (!steps.length || document.querySelector(".pair-row")) return;
    let current = -1;
    function go(i) {
      if (i < 0 || i >= steps.length) return;
      if (current >= 0) steps[current].classList.remove("current");
      current = i;
      steps[i].classList.add("current");
      steps[i].scrollIntoView({ block: "start" });
      const id = steps[i].dataset.step;
      document.querySelectorAll(".thumb").forEach(function (t) {
        t.classList.toggle("current", t.getAttribute("href") === "#step-" + id);
      });
    }
    const start = steps.findIndex(function (s) { return "#" + s.id === location.hash; });
    if (start >= 0) go(start);
    document.addEventListener("keydown", function (event) {
      if (event.target.closest("input, select, textarea") || event.metaKey || event.ctrlKey || event.altKey) return;
      if (event.key === "j" || event.key === "ArrowRight") { go(current + 1); event.preventDefault(); }
      if (event.key === "k" || event.key === "ArrowLeft") { go(Math.max(0, current - 1)); event.preventDefault(); }
      if (event.key === "Escape") {
        document.querySelectorAll("figure.zoomed").forEach(function (f) { f.classList.remove("zoomed"); });
      }
    });
  }

  document.addEventListener("click", function (event) {
    const img = event.target.closest("figure.shot img");
    if (img) img.closest("figure").classList.toggle("zoomed");
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(setupTable);
    setupSteps();
  });
})();
