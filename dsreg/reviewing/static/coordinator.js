// dsreg review, the coordinator's view (the operator's only): progress per rater, items
// complete, partial and untouched, Fleiss' kappa and the items whose votes disagree most, read
// from the server every few seconds (it reads the votes log; nothing is written). Data goes in
// with textContent only.
"use strict";

(function () {
  const POLL_MS = 3000;
  const $ = (id) => document.getElementById(id);

  function cell(text) {
    const td = document.createElement("td");
    td.textContent = text;
    return td;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    tr.append(...cells);
    return tr;
  }

  // The table's body: a row of each entry (made by toRow), or one row saying there is none.
  function fill(id, entries, toRow, none) {
    const table = $(id);
    const rows = entries.map(toRow);
    if (!rows.length) {
      const td = cell(none);
      td.colSpan = table.tHead.rows[0].cells.length;
      rows.push(row([td]));
    }
    table.tBodies[0].replaceChildren(...rows);
  }

  function raterRow(rater) {
    const tr = row([cell(rater.name), cell(String(rater.votes)), cell(String(rater.skips))]);
    tr.dataset.rater = rater.name;
    return tr;
  }

  function disagreementRow(state, item) {
    const open = document.createElement("a");
    open.href = "/?row=" + item.row;
    open.textContent = "Item " + item.position + " of " + state.items + " (row " + item.row + ")";
    const first = document.createElement("td");
    first.append(open);
    const counts = state.answers.map((a) => a + " " + item.counts[a]).join(" · ");
    return row([first, cell(item.example_id), cell(counts), cell(item.agreement.toFixed(2))]);
  }

  function show(state) {
    $("complete").textContent = state.complete + " of " + state.items;
    $("partial").textContent = String(state.partial);
    $("untouched").textContent = String(state.untouched);
    $("votes").textContent = String(state.votes);
    $("kappa").textContent = state.kappa === null ? "n/a" : state.kappa.toFixed(3);
    $("kappa-note").textContent =
      "Kappa over the " + state.kappa_items + " items with at least two votes" +
      (state.kappa === null ? " (none yet, or every vote names one answer)." : ".") +
      " An item is complete with " + state.votes_per_item + " votes.";
    fill("raters", state.raters, raterRow, "No rater has answered yet.");
    fill("disagreements", state.disagreements, (item) => disagreementRow(state, item),
      "No item's votes disagree yet.");
    $("updated").textContent = "Updated " + new Date().toLocaleTimeString() +
      "; refreshed every " + POLL_MS / 1000 + " s.";
  }

  async function refresh() {
    try {
      const response = await fetch("/api/coordinator", { credentials: "same-origin" });
      const data = await response.json();
      if (!response.ok) {
        throw new Error(data.error || "the server answered " + response.status);
      }
      $("message").textContent = "";
      show(data);
    } catch (e) {
      $("message").textContent =
        "Not updated: " + e.message + ". Check that 'dsreg review' still runs.";
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    refresh();
    setInterval(() => {
      if (!document.hidden) {
        refresh();
      }
    }, POLL_MS);
  });
})();
