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

  function matches(values, control) {
    const wanted = control.value.trim();
    if (!wanted) return true;
    const value = values[control.dataset.filter] || "";
    switch (control.dataset.kind || "eq") {
      case "text": return value.toLowerCase().includes(wanted.toLowerCase());
      case "min": return num(value) >= Number(wanted);
      case "max": return num(value) <= Number(wanted);
      default: return value === wanted;
    }
  }

  function compare(key, numeric, sign) {
    return function (a, b) {
      const x = a.d[key] || "", y = b.d[key] || "";
      if (x === "" || y === "") {  // empty values last, whatever the direction
        return x === y ? a.order - b.order : (x === "" ? 1 : -1);
      }
      const c = numeric ? num(x) - num(y) : x.localeCompare(y);
      return c !== 0 ? sign * c : a.order - b.order;
    };
  }

  // A table's rows come as JSON ({d: values, h: cells}); the first `limit` that match are listed.
  function setupTable(table) {
    const body = table.tBodies[0];
    const rows = JSON.parse(document.getElementById(table.dataset.rows).textContent);
    rows.forEach(function (row, i) { row.order = i; });
    let order = rows, limit = Number(table.dataset.limit) || Infinity;
    const form = document.querySelector('form[data-for="' + table.id + '"]');
    const controls = form ? Array.from(form.querySelectorAll("[data-filter]")) : [];
    const counter = document.querySelector('[data-count-for="' + table.id + '"]');
    const showAll = form ? form.querySelector("[data-show-all]") : null;
    const heads = Array.from(table.tHead.rows[0].cells).filter(function (th) { return th.dataset.sort; });

    function list() {
      const matched = order.filter(function (row) {
        return controls.every(function (c) { return matches(row.d, c); });
      });
      const listed = matched.slice(0, limit);
      body.innerHTML = listed.map(function (row) { return "<tr>" + row.h + "</tr>"; }).join("");
      Array.from(body.rows).forEach(function (tr, i) { Object.assign(tr.dataset, listed[i].d); });
      let scored = 0, sum = 0;
      for (const row of matched) {
        const score = num(row.d.score);
        if (!isNaN(score)) { scored += 1; sum += score; }
      }
      if (counter) {
        counter.textContent = matched.length + " of " + rows.length + " shown" +
          (listed.length < matched.length ? " (first " + listed.length + " listed)" : "") +
          (scored ? " · mean score " + (sum / scored).toFixed(3) + " over " + scored + " scored" : "");
      }
      if (showAll) showAll.hidden = listed.length === matched.length;
    }

    function sort(key, direction) {
      const head = heads.find(function (th) { return th.dataset.sort === key; });
      if (!head) return;
      order = rows.slice().sort(compare(key, head.dataset.type === "num", direction === "desc" ? -1 : 1));
      heads.forEach(function (th) { th.classList.remove("asc", "desc"); });
      head.classList.add(direction);
    }

    function save() {
      if (!form) return;
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
        list();
        if (form) {
          const state = readState();
          state.set("sort", th.dataset.sort + ":" + direction);
          writeState(state);
        }
      });
    });
    if (form) {
      form.addEventListener("input", function () { list(); save(); });
      form.addEventListener("change", function () { list(); save(); });
      form.addEventListener("submit", function (event) { event.preventDefault(); });
      form.addEventListener("reset", function () {
        setTimeout(function () { list(); writeState(new URLSearchParams()); }, 0);
      });
      if (showAll) showAll.addEventListener("click", function () { limit = Infinity; list(); });
      const state = readState();
      controls.forEach(function (c) { if (state.has(c.name)) c.value = state.get(c.name); });
      const saved = (state.get("sort") || "").split(":");
      if (saved[0]) sort(saved[0], saved[1] === "desc" ? "desc" : "asc");
    }
    list();
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

  // While the queue runs, the run page reloads itself (its filters live in the address and survive it), except
  // while something is being typed.
  function setupReload() {
    const live = document.querySelector("[data-reload]");
    if (!live) return;
    const every = Number(live.dataset.reload) * 1000;
    function reload() {
      if (document.activeElement && document.activeElement.closest("input, select, textarea")) {
        setTimeout(reload, every);
      } else {
        location.reload();
      }
    }
    setTimeout(reload, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(setupTable);
    setupSteps();
    setupReload();
  });
})();
