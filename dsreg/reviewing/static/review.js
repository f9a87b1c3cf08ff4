// dsreg review page. Plain JS, no dependencies. Data from the server is only ever put in the
// page with textContent (never innerHTML), so class names and ids render as text.
"use strict";

(function () {
  const TOKEN = document.querySelector('meta[name="dsreg-token"]').content;
  const STORE_KEY = "dsreg-review-reviewer";
  const TEXT_LIMIT = 20000;
  const $ = (id) => document.getElementById(id);
  let reviewer = null;
  let item = null;
  let busy = false;
  let objectUrl = null;

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

  function showProgress(p) {
    $("progress").textContent =
      "You: " + p.you + " answered · Everyone: " + p.everyone + " votes · Remaining: " +
      p.remaining + " of " + p.items + " items (" + p.complete + " complete)";
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
      const id = document.createElement("code");
      id.textContent = current.example_id;
      const note = document.createElement("p");
      note.className = "nopayload";
      note.textContent = "Label-only example: judge it by its id and metadata.";
      wrap.append(id, note);
      box.append(wrap);
      return;
    }
    const response = await fetch(current.payload, { credentials: "same-origin" });
    if (!response.ok) {
      throw new Error("cannot load the example (" + response.status + ")");
    }
    const blob = await response.blob();
    if (item !== current) {
      return; // an answer moved on while the payload loaded
    }
    const kind = (response.headers.get("Content-Type") || "").split(";")[0];
    if (kind.startsWith("image/")) {
      const img = document.createElement("img");
      objectUrl = URL.createObjectURL(blob);
      img.src = objectUrl;
      img.alt = "example " + current.example_id;
      img.id = "example-image";
      box.append(img);
    } else if (kind === "text/plain") {
      const pre = document.createElement("pre");
      const text = await blob.text();
      pre.textContent = text.length > TEXT_LIMIT ? text.slice(0, TEXT_LIMIT) + "\n…" : text;
      box.append(pre);
    } else {
      const note = document.createElement("p");
      note.className = "nopayload";
      note.textContent = "Binary payload of " + blob.size + " bytes (not an image or text).";
      box.append(note);
    }
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
    item = data.item;
    $("card").hidden = !item;
    $("done").hidden = !!item;
    if (!item) {
      return;
    }
    $("given").textContent = item.given.name;
    $("suggested").textContent = item.suggested.name;
    $("example-id").textContent = item.example_id;
    $("row").textContent = String(item.row);
    $("score").textContent = item.score === null ? "none" : item.score.toFixed(4);
    showMetadata(item.metadata);
    // Not awaited: the answers stay live while the example loads.
    showPayload(item).catch((e) => say(e.message));
  }

  async function act(path, body) {
    if (busy) {
      return;
    }
    busy = true;
    document.body.classList.add("busy");
    try {
      say("");
      show(await post(path, Object.assign({ reviewer: reviewer }, body)));
    } catch (e) {
      say(e.message);
      if (e.status === 409 && path !== "/api/undo") {
        // The item filled up while this reviewer held it too long: move on to the next.
        try {
          show(await post("/api/next", { reviewer: reviewer }));
        } catch (again) {
          say(again.message);
        }
      }
    } finally {
      busy = false;
      document.body.classList.remove("busy");
    }
  }

  function answer(value) {
    if (item) {
      act("/api/vote", { row: item.row, answer: value });
    }
  }

  function skip() {
    if (item) {
      act("/api/skip", { row: item.row });
    }
  }

  function undo() {
    act("/api/undo", {});
  }

  function start(name) {
    reviewer = name;
    localStorage.setItem(STORE_KEY, name);
    $("reviewer-name").textContent = name;
    $("name-form").hidden = true;
    $("review").hidden = false;
    act("/api/next", {});
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
    $("undo").addEventListener("click", undo);
    $("rename").addEventListener("click", askName);
    $("name").addEventListener("submit", (event) => {
      event.preventDefault();
      const name = $("name-input").value.trim();
      if (name) {
        start(name);
      }
    });
    $("finish").addEventListener("submit", async (event) => {
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
        out.textContent =
          "Stored validated overlay " + data.overlay.slice(7, 19) + ": " + counts +
          (data.tagged ? ". Tagged " + data.tagged + "." : ".");
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
      if (target instanceof HTMLInputElement || target instanceof HTMLSelectElement) {
        return;
      }
      const keys = { "1": "given", "2": "guessed", "3": "both", "4": "neither" };
      const key = event.key.toLowerCase();
      if (keys[key]) {
        answer(keys[key]);
      } else if (key === "s") {
        skip();
      } else if (key === "u" || key === "backspace") {
        undo();
      } else {
        return;
      }
      event.preventDefault();
    });

    const fromUrl = new URLSearchParams(location.search).get("reviewer");
    const name = (fromUrl || localStorage.getItem(STORE_KEY) || "").trim();
    if (name) {
      start(name);
    } else {
      askName();
    }
  });
})();
