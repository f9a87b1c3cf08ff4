// dsreg review page, pair items: an audit's finding (a row named a duplicate or contaminated)
// is shown beside its best match, with the tier and the distance, and raters answer whether
// the two are the same item. review.js calls dsregPairs.show for each pair item and takes no
// answer until both the item and its match are drawn. Data goes in with textContent only.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let objectUrl = null;

  function note(text) {
    const p = document.createElement("p");
    p.className = "missing";
    p.textContent = text;
    return p;
  }

  // The distance as its tier measures it (docs/audit.md, "Tiers").
  function distanceText(pair) {
    const d = pair.distance;
    if (pair.tier === "exact") {
      return "0 (the same bytes)";
    }
    if (pair.tier === "image") {
      return d + " of 64 bits differ";
    }
    if (pair.tier === "text") {
      return d.toFixed(3) + " (1 − Jaccard)";
    }
    return d.toFixed(3) + " of the 13-grams unmatched";
  }

  async function drawMatch(current, isCurrent) {
    const draw = window.dsregDraw; // review.js's
    const box = $("match-payload");
    box.replaceChildren();
    if (objectUrl) {
      URL.revokeObjectURL(objectUrl);
      objectUrl = null;
    }
    const name = "Match of example " + current.position + " of " + current.of;
    const response = await fetch(current.pair.payload, { credentials: "same-origin" });
    if (!isCurrent()) {
      return;
    }
    if (!response.ok) {
      const why = await draw.refusal(response);
      box.append(note("The match cannot be shown: " + why + ". Press S to skip this pair."));
      return;
    }
    const blob = await response.blob();
    const kind = (response.headers.get("Content-Type") || "").split(";")[0];
    if (!isCurrent()) {
      return;
    }
    if (kind.startsWith("image/")) {
      objectUrl = URL.createObjectURL(blob);
      const img = await draw.decodedImage(objectUrl, name, "match-image");
      if (isCurrent()) {
        box.append(img);
      }
    } else if (kind === "text/plain") {
      box.append(await draw.textBox(blob, name, "match-text"));
    } else {
      box.append(note("The match is a binary payload of " + blob.size + " bytes."));
    }
  }

  window.dsregPairs = {
    // Show current's finding and draw its match; done() once it is drawn (or said missing).
    show(current, isCurrent, done) {
      const pair = current.pair;
      $("pair-verdict").textContent = pair.verdict;
      $("pair-tier").textContent = pair.tier;
      $("pair-distance").textContent = distanceText(pair);
      $("pair-more").textContent =
        pair.matches > 1 ? "The best of " + pair.matches + " matches is shown." : "";
      $("match-id").textContent = pair.example_id;
      $("match-dataset").textContent = pair.source + " (" + pair.dataset.slice(7, 19) + ")";
      drawMatch(current, isCurrent)
        .catch((e) => $("match-payload").replaceChildren(note(e.message)))
        .finally(() => requestAnimationFrame(done));
    },
  };
})();
