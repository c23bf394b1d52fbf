// Team allocation form: live derived quota, add/remove quota rows, namespace
// preview. The form works without it; this only shows values as they are typed.
"use strict";
(function () {
  const form = document.getElementById("team-form");
  if (!form) return;
  const tbody = document.querySelector("#quota-rows tbody");
  const template = document.getElementById("quota-row-template");
  const addButton = document.getElementById("add-quota-row");
  const maxRows = Number(addButton.dataset.maxRows || 15);

  // Namespace preview follows the team name.
  const name = document.getElementById("name");
  const preview = document.getElementById("namespace-preview");
  if (name && preview && name.dataset.namespacePrefix !== undefined) {
    name.addEventListener("input", () => { preview.textContent = name.dataset.namespacePrefix + name.value.trim(); });
  }

  // The borrow limit only applies to "Lend and borrow".
  const lending = document.getElementById("lending");
  const borrow = document.getElementById("borrow-limit-field");
  const meaning = document.getElementById("lending-meaning");
  const syncLending = () => {
    borrow.hidden = lending.value !== "LendAndBorrow";
    const chosen = lending.selectedOptions[0];
    if (meaning && chosen) meaning.textContent = chosen.dataset.meaning || "";
  };
  lending.addEventListener("change", syncLending);
  syncLending();

  const timers = new WeakMap();
  function field(row, key) { return row.querySelector(`[data-field="${key}"]`); }

  // The server derives the values (one implementation of the rules); the
  // script only asks and shows. vCPU and memory show as placeholders, so a
  // typed value still overrides them.
  async function derive(row) {
    const params = new URLSearchParams();
    for (const key of ["instanceType", "count", "gpus", "partition", "partitions", "neuron", "vcpu", "memoryGiB"]) {
      params.set(key, field(row, key).value.trim());
    }
    try {
      const res = await fetch("/teams/derive?" + params.toString(), { headers: { Accept: "application/json" } });
      if (!res.ok) return;
      const d = await res.json();
      field(row, "derived").textContent = d.derived;
      field(row, "warning").textContent = d.warning;
      field(row, "vcpu").placeholder = d.vcpu;
      field(row, "memoryGiB").placeholder = d.memoryGiB;
    } catch (_) { /* preview only: the submit still validates */ }
  }
  function schedule(row) {
    clearTimeout(timers.get(row));
    timers.set(row, setTimeout(() => derive(row), 120));
  }
  function wire(row) {
    row.addEventListener("input", () => schedule(row));
    row.addEventListener("change", () => schedule(row));
    row.querySelector(".remove-row").addEventListener("click", () => {
      if (tbody.querySelectorAll(".quota-row").length > 1) row.remove();
      else row.querySelectorAll("input, select").forEach((el) => { el.value = ""; });
      renumber();
    });
  }
  // Rows are posted as quota.N.field; keep N dense after removals.
  function renumber() {
    tbody.querySelectorAll(".quota-row").forEach((row, i) => {
      row.dataset.index = String(i);
      row.querySelectorAll("[name]").forEach((el) => { el.name = el.name.replace(/^quota\.\d+\./, `quota.${i}.`); });
    });
    addButton.disabled = tbody.querySelectorAll(".quota-row").length >= maxRows;
  }
  addButton.addEventListener("click", () => {
    const row = template.content.firstElementChild.cloneNode(true);
    tbody.appendChild(row);
    wire(row);
    renumber();
    row.querySelector("select").focus();
  });
  tbody.querySelectorAll(".quota-row").forEach((row) => { wire(row); derive(row); });
  renumber();
})();
