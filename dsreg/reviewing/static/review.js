// dsreg review page. Plain JS, no dependencies. Data from the server is only ever put in the
// page with textContent (never innerHTML), so class names and ids render as text.
//
// Every answer is deliberate: none is taken until the item's example has been drawn (an image
// loaded and decoded, text or the label-only card put in) and GUARD_MS have passed since, a
// held-down key's repeats are ignored, and each vote carries the item's ticket, so the server
// refuses (409, nothing saved) an answer meant for an item it no longer shows this rater.
"use strict";

(function () {
  const meta = (name) => document.querySelector('meta[name="' + name + '"]').content;
  const TOKEN = meta("dsreg-token");
  const RATER = meta("dsreg-rater"); // a named rater's link: the name is the link's
  const PAIRS = meta("dsreg-pairs") === "1"; // an audit's findings, each beside its match
  const OPERATOR = meta("dsreg-operator") === "1";
  const STORE_KEY = "dsreg-review-reviewer";
  const TEXT_LIMIT = 20000;
  const GUARD_MS = 150;
  const POLL_MS = 3000; // how often the progress line (and the done page) is brought up to date
  const ANSWER_NAMES = {
    given: "Given label fits",
    guessed: "Suggested label fits",
    both: "Both fit",
    neither: "Neither fits",
    same: "Same item",
    different: "Different items",
  };
  const KEYS = PAIRS
    ? { "1": "same", "2": "different" }
    : { "1": "given", "2": "guessed", "3": "both", "4": "neither" };
  const $ = (id) => document.getElementById(id);
  let reviewer = null;
  let item = null;
  let busy = false;
  let objectUrl = null;
  let readyAt = Infinity; // when the shown item's answers are taken (performance.now())
  let polling = false;

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Dsreg-Token": TOKEN },
      body: JSON.stringify(body),
    });
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = { error: "the server answered " + response.status };
    }
    if (!response.ok) {
      const error = new Error(data && data.error ? data.error : "request failed: " + response.status);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  function say(text) {
    $("message").textContent = text || "";
  }

  function confirm(text) {
    $("saved").textContent = text || "";
  }

  // What happened to the request, in the words of what the rater did, and what to do now.
  const UNREACHABLE = {
    "/api/vote": "Not saved: the server could not be reached. Your answer was not recorded; " +
      "press the key again when the connection is back.",
    "/api/skip": "Not skipped: the server could not be reached. Your skip was not recorded; " +
      "press S again when the connection is back.",
    "/api/undo": "Not undone: the server could not be reached. Nothing was changed; press U " +
      "again when the connection is back.",
    "/api/next": "The next item could not be loaded: the server could not be reached. Every " +
      "answer saved so far is kept; reload the page when the connection is back.",
    "/api/order": "The order was not changed: the server could not be reached. Choose it again " +
      "when the connection is back.",
  };
  const FAILED = {
    "/api/vote": "Not saved: the server failed while recording your answer (",
    "/api/skip": "Not skipped: the server failed while recording your skip (",
    "/api/undo": "Not undone: the server failed while undoing (",
  };

  function failureText(path, e) {
    if (e.status === undefined) {
      return UNREACHABLE[path] || "The server could not be reached; try again when the connection is back.";
    }
    if (e.status >= 500 && FAILED[path]) {
      return FAILED[path] + e.message + "). Press the key again; if it fails again, tell the " +
        "person running 'dsreg review'.";
    }
    return e.message;
  }

  function ordinal(n) {
    const tens = n % 100;
    const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th");
    return n + suffix;
  }

  // "3rd most suspicious of 284"; a rank shared by items of the same score says so, since
  // "1st" alone would claim one item stands out when many are as suspicious.
  function rankText(it) {
    if (it.rank === null) {
      return "no score";
    }
    const place = ordinal(it.rank) + " most suspicious of " + it.ranked;
    return it.tied > 1 ? "tied " + place + " (" + it.tied + " items share this score)" : place;
  }

  function waitForDrawing() {
    readyAt = Infinity;
    document.body.classList.add("drawing");
  }

  function drawn(current) {
    if (item !== current) {
      return;
    }
    // A pair item is drawn once both the item and its match are (pairs.js).
    current.parts = (current.parts || 0) + 1;
    if (current.pair && current.parts < 2) {
      return;
    }
    readyAt = performance.now() + GUARD_MS;
    setTimeout(() => {
      if (item === current) {
        document.body.classList.remove("drawing");
      }
    }, GUARD_MS);
  }

  function ready() {
    return item !== null && !busy && performance.now() >= readyAt;
  }

  function markSelected(answer) {
    for (const button of document.querySelectorAll("button.answer")) {
      const selected = button.dataset.answer === answer;
      button.classList.toggle("selected", selected);
      button.setAttribute("aria-pressed", selected ? "true" : "false");
    }
  }

  function showProgress(p) {
    $("progress").textContent =
      "You: " + p.you + " answered · Everyone: " + p.everyone + " votes · Remaining: " +
      p.remaining + " of " + p.items + " items (" + p.complete + " complete)";
    const bar = $("progress-bar");
    bar.max = Math.max(p.items, 1);
    bar.value = p.complete;
    $("done-counts").textContent =
      "Everyone: " + p.everyone + " votes · " + p.complete + " of " + p.items +
      " items complete · " + p.remaining + " left (you answered " + p.you + ")";
    const warning = $("finish-warning");
    if (warning) {
      warning.textContent = p.remaining
        ? "Warning: " + p.remaining + " of " + p.items + " items have fewer than " +
          meta("dsreg-votes-per-item") + " votes. Finishing now leaves those whose votes " +
          "agree on no answer 'unreviewed' (kept by every view, not counted as errors)."
        : "";
    }
  }

  // Why a payload's response is not the payload: the server's message, else its status.
  async function refusal(response) {
    try {
      return (await response.json()).error || "the server answered " + response.status;
    } catch (e) {
      return "the server answered " + response.status; // not JSON: the status says it
    }
  }

  // An image of the object URL src, decoded before it is put in (drawn with the next frame).
  async function decodedImage(src, alt, id) {
    const img = document.createElement("img");
    img.src = src;
    img.alt = alt;
    img.id = id;
    await img.decode().catch(() => undefined);
    return img;
  }

  // A text payload in a box the keyboard can scroll, cut at TEXT_LIMIT characters.
  async function textBox(blob, name, id) {
    const pre = document.createElement("pre");
    const text = await blob.text();
    pre.textContent = text.length > TEXT_LIMIT ? text.slice(0, TEXT_LIMIT) + "\n…" : text;
    pre.id = id;
    pre.tabIndex = 0;
    pre.setAttribute("aria-label", name + " (text)");
    return pre;
  }

  // pairs.js draws a match with the same helpers.
  window.dsregDraw = { refusal, decodedImage, textBox };

  function note(text, className) {
    const p = document.createElement("p");
    p.className = className || "nopayload";
    p.textContent = text;
    return p;
  }

  // The neutral name of an example: its place in the queue, never its id or file path
  // (an ImageFolder path names the given label).
  function exampleName(current) {
    return "Example " + current.position + " of " + current.of;
  }

  function showMissing(current, text) {
    const box = $("payload");
    box.replaceChildren(note(text + " Judge it by its labels and metadata, or press S to skip it.", "missing"));
    drawn(current);
  }

  // A --media-url address: the page loads it itself (the policy allows that origin for images
  // and media only), as audio when the address ends in an audio extension, else an image.
  function showRemote(current) {
    const box = $("payload");
    const path = current.payload.split(/[?#]/)[0].toLowerCase();
    const audio = /\.(wav|mp3|ogg|oga|flac|m4a)$/.test(path);
    const el = document.createElement(audio ? "audio" : "img");
    const failed = () => {
      if (item === current) {
        // The address holds the example id, which can name the given label: the operator's only.
        const where = current.example_id === undefined ? "" : " (" + current.payload + ")";
        showMissing(current, "The media address has no file for this example" + where + ".");
      }
    };
    el.addEventListener("error", failed);
    if (audio) {
      el.controls = true;
      el.preload = "metadata";
      el.setAttribute("aria-label", exampleName(current));
      el.addEventListener("loadedmetadata", () => drawn(current));
      el.src = current.payload;
      box.append(el);
      return;
    }
    el.alt = exampleName(current);
    el.id = "example-image";
    el.src = current.payload;
    el.decode().then(
      () => {
        if (item === current) {
          box.append(zoomable(el));
          requestAnimationFrame(() => drawn(current));
        }
      },
      failed
    );
  }

  // An image in the card fits the box (CSS); a tiny one (64 px a side or less) is scaled up
  // with crisp pixels. A click, or Enter on it, shows it at its own size over the page.
  const TINY = 64;

  function zoomable(img) {
    const tiny = img.naturalWidth <= TINY && img.naturalHeight <= TINY;
    img.classList.toggle("tiny", tiny);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "zoom-button";
    button.title = "Show at its own size";
    button.append(img);
    button.addEventListener("click", () => openZoom(img, tiny));
    return button;
  }

  function openZoom(img, tiny) {
    const big = document.createElement("img");
    big.src = img.src;
    big.alt = img.alt + " at its own size";
    if (tiny) {
      // Its own size is a thumbnail: the largest whole multiple that fits the window instead.
      const scale = Math.max(1, Math.floor(Math.min(innerWidth, innerHeight - 80) / img.naturalWidth));
      big.width = img.naturalWidth * scale;
      big.classList.add("tiny");
    }
    $("zoom-box").replaceChildren(big);
    $("zoom-view").hidden = false;
    $("zoom-close").focus();
  }

  function closeZoom() {
    if (!$("zoom-view").hidden) {
      $("zoom-view").hidden = true;
      $("zoom-box").replaceChildren();
      $("payload").querySelector("button")?.focus();
    }
  }

  async function showPayload(current) {
    const box = $("payload");
    box.replaceChildren();
    if (objectUrl) {
      URL.revokeObjectURL(objectUrl);
      objectUrl = null;
    }
    if (!current.payload) {
      const wrap = document.createElement("div");
      wrap.className = "labelonly";
      if (current.example_id !== undefined) {
        const id = document.createElement("code"); // the operator's page only
        id.textContent = current.example_id;
        wrap.append(id);
      }
      wrap.append(note("Label-only example: judge it by its labels and metadata."));
      box.append(wrap);
      drawn(current);
      return;
    }
    if (current.remote) {
      showRemote(current);
      return;
    }
    const response = await fetch(current.payload, { credentials: "same-origin" });
    if (item !== current) {
      return; // an answer moved on while the payload loaded
    }
    if (!response.ok) {
      showMissing(current, "This example cannot be shown: " + (await refusal(response)) + ".");
      return;
    }
    const blob = await response.blob();
    if (item !== current) {
      return;
    }
    const kind = (response.headers.get("Content-Type") || "").split(";")[0];
    if (kind.startsWith("image/")) {
      objectUrl = URL.createObjectURL(blob);
      const img = await decodedImage(objectUrl, exampleName(current), "example-image");
      if (item !== current) {
        return;
      }
      box.append(zoomable(img));
    } else if (kind.startsWith("audio/")) {
      const audio = document.createElement("audio");
      objectUrl = URL.createObjectURL(blob);
      audio.controls = true;
      audio.src = objectUrl;
      audio.id = "example-audio";
      audio.setAttribute("aria-label", exampleName(current));
      box.append(audio);
    } else if (kind === "text/plain") {
      box.append(await textBox(blob, exampleName(current), "example-text"));
    } else {
      box.append(note("Binary payload of " + blob.size + " bytes (not an image, audio or text)."));
    }
    requestAnimationFrame(() => drawn(current));
  }

  function showMetadata(rows) {
    const table = $("metadata");
    table.replaceChildren();
    for (const [key, value] of rows) {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      const td = document.createElement("td");
      th.textContent = key;
      td.textContent = value;
      tr.append(th, td);
      table.append(tr);
    }
  }

  function show(data) {
    showProgress(data.progress);
    if (data.reviewer && data.reviewer !== reviewer) {
      reviewer = data.reviewer; // as the server records it (names are casefolded)
      $("reviewer-name").textContent = reviewer;
      if (!RATER) {
        localStorage.setItem(STORE_KEY, reviewer);
      }
    }
    const before = item;
    waitForDrawing();
    markSelected(null);
    closeZoom();
    item = data.item;
    $("card").hidden = !item;
    $("done").hidden = !!item;
    if (!item) {
      $("announce").textContent = before ? "Nothing left for you to review." : "";
      return;
    }
    if (!before || before.row !== item.row || before.ticket !== item.ticket) {
      $("comment").value = "";
    }
    $("position").textContent = exampleName(item);
    $("given").textContent = item.given.name;
    $("suggested").textContent = item.suggested ? item.suggested.name : "";
    if ($("example-id")) {
      $("example-id").textContent = item.example_id; // the operator's page only
      $("row").textContent = String(item.row);
    }
    const rank = $("rank");
    rank.textContent = rankText(item);
    rank.title = item.score === null ? "no score" : "score " + Number(item.score.toPrecision(6));
    $("announce").textContent = exampleName(item) + ". Given label: " + item.given.name +
      (item.suggested
        ? ". Suggested label: " + item.suggested.name + "."
        : ". Shown beside a possible copy: the same item, or different items?");
    showMetadata(item.metadata);
    bringIntoView();
    // Not awaited; answers are taken once the example is drawn (drawn()).
    showPayload(item).catch((e) => say(e.message));
    if (item.pair) {
      const current = item;
      window.dsregPairs.show(current, () => item === current, () => drawn(current));
    }
  }

  // The operator opened an item from the coordinator's view: its votes so far.
  function showOpened(opened) {
    const out = $("opened");
    if (!out) {
      return;
    }
    if (!opened) {
      out.textContent = "";
      return;
    }
    const counts = Object.entries(opened.counts)
      .map(([answer, n]) => ANSWER_NAMES[answer] + " " + n)
      .join(" · ");
    const who = opened.reviewers.length ? " (by " + opened.reviewers.join(", ") + ")" : "";
    out.textContent = "Opened row " + opened.row + " from the coordinator's view: " + counts + who + ".";
  }

  // The card's top in view on every new item (a phone scrolled down to the answers, or to
  // the metadata, sees the new example), left alone when it is in view already.
  function bringIntoView() {
    const top = $("card").getBoundingClientRect().top;
    if (top < 0 || top > innerHeight / 3) {
      $("card").scrollIntoView({ block: "start", behavior: "instant" });
    }
  }

  // "Example 12" of a saved answer: the place of the item it answered (never its id).
  function savedText(data, answered) {
    const where = answered ? "example " + answered.position : "row " + data.saved?.row;
    if (data.saved && !data.saved.answer) {
      return "Skipped " + where + ". Press U to undo.";
    }
    if (data.saved) {
      const noted = data.saved.comment ? " with your comment" : "";
      return "Saved: “" + ANSWER_NAMES[data.saved.answer] + "”" + noted + " for " + where +
        ". Press U to undo.";
    }
    if (data.undone) {
      const what = data.undone.answer
        ? "your answer “" + ANSWER_NAMES[data.undone.answer] + "” (shown selected)"
        : "your skip";
      const place = data.item ? "example " + data.item.position : "row " + data.undone.row;
      return "Undone: " + what + " for " + place + ". Answer it again.";
    }
    return "";
  }

  async function act(path, body) {
    if (busy) {
      return;
    }
    busy = true;
    document.body.classList.add("busy");
    const answered = item;
    try {
      say("");
      const data = await post(path, Object.assign({ reviewer: reviewer }, body));
      show(data);
      showOpened(data.opened);
      confirm(savedText(data, data.saved ? answered : null));
      if (data.undone && data.undone.answer) {
        markSelected(data.undone.answer);
        $("comment").value = data.undone.comment || "";
      }
    } catch (e) {
      confirm("");
      say(failureText(path, e));
      if (e.status === 409 && path !== "/api/undo") {
        // The item filled up while this reviewer held it too long: move on to the next.
        try {
          show(await post("/api/next", { reviewer: reviewer }));
        } catch (again) {
          say(failureText("/api/next", again));
        }
      }
    } finally {
      busy = false;
      document.body.classList.remove("busy");
    }
  }

  function notReady() {
    if (item && !busy) {
      say("Not taken: wait until the example is shown, then answer.");
    }
  }

  function answer(value) {
    if (!ready()) {
      notReady();
      return;
    }
    act("/api/vote", {
      row: item.row,
      answer: value,
      ticket: item.ticket,
      comment: $("comment").value,
    });
  }

  function skip() {
    if (!ready()) {
      notReady();
      return;
    }
    act("/api/skip", { row: item.row, ticket: item.ticket });
  }

  function undo() {
    act("/api/undo", {});
  }

  // The progress line counts everyone's votes as they come, and the done page takes an item
  // that needs this reviewer again: both are asked for every POLL_MS while the page is seen.
  async function poll() {
    if (polling || busy || !reviewer || $("review").hidden || document.hidden) {
      return;
    }
    polling = true;
    try {
      if (item) {
        const data = await post("/api/progress", { reviewer: reviewer });
        if (!busy) {
          showProgress(data.progress);
        }
      } else {
        const data = await post("/api/next", { reviewer: reviewer });
        if (!busy && !item) {
          show(data);
        }
      }
    } catch (e) {
      // The next answer says what happened; a poll has nothing to save.
    } finally {
      polling = false;
    }
  }

  function start(name) {
    reviewer = name;
    if (!RATER) {
      localStorage.setItem(STORE_KEY, name);
    }
    $("reviewer-name").textContent = name;
    $("name-form").hidden = true;
    $("review").hidden = false;
    // The coordinator's view links an item as ?row=N: the operator's page opens it once.
    const params = new URLSearchParams(location.search);
    const row = Number.parseInt(params.get("row") || "", 10);
    if (OPERATOR && Number.isInteger(row)) {
      params.delete("row");
      history.replaceState(null, "", location.pathname + (params.size ? "?" + params : ""));
      act("/api/next", { row: row });
    } else {
      act("/api/next", {});
    }
  }

  function askName() {
    $("review").hidden = true;
    $("name-form").hidden = false;
    $("name-input").value = reviewer || "";
    $("name-input").focus();
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const button of document.querySelectorAll("button.answer")) {
      button.addEventListener("click", () => answer(button.dataset.answer));
    }
    $("skip").addEventListener("click", skip);
    $("zoom-close").addEventListener("click", closeZoom);
    $("zoom-box").addEventListener("click", closeZoom);
    const order = $("order"); // the operator's page only
    order?.addEventListener("change", () => {
      const pair = $("pair")?.value; // no class pairs in a pair review
      act("/api/order", {
        sort: $("sort").value,
        pair: pair ? pair.split(",").map(Number) : null,
      });
    });
    setInterval(poll, POLL_MS);
    $("undo").addEventListener("click", undo);
    $("rename").addEventListener("click", askName);
    $("name").addEventListener("submit", (event) => {
      event.preventDefault();
      const name = $("name-input").value.trim();
      if (name) {
        start(name);
      }
    });
    const finish = $("finish"); // the operator's page only
    finish?.addEventListener("submit", async (event) => {
      event.preventDefault();
      const out = $("finish-result");
      out.textContent = "Storing…";
      try {
        const data = await post("/api/finish", {
          threshold: Number($("threshold").value),
          tag: $("tag").value.trim(),
          view: $("view").value,
        });
        const counts = Object.entries(data.summary)
          .filter(([key]) => key !== "rows")
          .map(([key, value]) => key + " " + value)
          .join(", ");
        const early = data.short
          ? " Finished early: " + data.short + " items had fewer than " + data.votes_per_item +
            " votes."
          : "";
        out.textContent =
          "Stored validated overlay " + data.overlay.slice(7, 19) + ": " + counts +
          (data.tagged ? ". Tagged " + data.tagged + "." : ".") + early;
        out.dataset.overlay = data.overlay;
      } catch (e) {
        out.textContent = e.message;
      }
    });
    document.addEventListener("keydown", (event) => {
      const target = event.target;
      if (event.ctrlKey || event.metaKey || event.altKey || $("review").hidden) {
        return;
      }
      if (event.key === "Escape" && !$("zoom-view").hidden) {
        closeZoom();
        event.preventDefault();
        return;
      }
      if (
        target instanceof HTMLInputElement ||
        target instanceof HTMLSelectElement ||
        target instanceof HTMLTextAreaElement
      ) {
        return;
      }
      if (event.repeat) {
        event.preventDefault(); // a held-down key answers once, not on every item it reaches
        return;
      }
      const key = event.key.toLowerCase();
      if (KEYS[key]) {
        answer(KEYS[key]);
      } else if (key === "s") {
        skip();
      } else if (key === "u" || key === "backspace") {
        undo();
      } else {
        return;
      }
      event.preventDefault();
    });

    if (RATER) {
      $("rename").hidden = true;
    }
    const fromUrl = new URLSearchParams(location.search).get("reviewer");
    const name = (RATER || fromUrl || localStorage.getItem(STORE_KEY) || "").trim();
    if (name) {
      start(name);
    } else {
      askName();
    }
  });
})();
