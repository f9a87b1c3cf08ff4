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

  function showRaters(raters) {
    const body = $("raters").tBodies[0];
    body.replaceChildren();
    for (const rater of raters) {
      const tr = document.createElement("tr");
      tr.dataset.rater = rater.name;
      tr.append(cell(rater.name), cell(String(rater.votes)), cell(String(rater.skips)));
      body.append(tr);
    }
    if (!raters.length) {
      const tr = document.createElement("tr");
      const td = cell("No rater has answered yet.");
      td.colSpan = 3;
      tr.append(td);
      body.append(tr);
    }
  }

  function showDisagreements(state) {
    const body = $("disagreements").tBodies[0];
    body.replaceChildren();
    for (const item of state.disagreements) {
      const tr = document.createElement("tr");
      const open = document.createElement("a");
      open.href = "/?row=" + item.row;
      open.textContent = "Item " + item.position + " of " + state.items + " (row " + item.row + ")";
      const first = document.createElement("td");
      first.append(open);
      const counts = state.answers.map((a) => a + " " + item.counts[a]).join(" · ");
      tr.append(first, cell(item.example_id), cell(counts), cell(item.agreement.toFixed(2)));
      body.append(tr);
    }
    if (!state.disagreements.length) {
      const tr = document.createElement("tr");
      const td = cell("No item's votes disagree yet.");
      td.colSpan = 4;
      tr.append(td);
      body.append(tr);
    }
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
    showRaters(state.raters);
    showDisagreements(state);
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
