// m3agent inspector: edits through the REST API, the streamed ask, and the player seeking to clip times.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

function status(text) { const el = $("#status"); if (el) el.textContent = text; }

async function api(method, url, body) {
  const response = await fetch(url, {
    method, headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined, credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = `${data.message || response.statusText}${data.hint ? " (" + data.hint + ")" : ""}`;
    status(message);
    alert(message);
    throw new Error(message);
  }
  return data;
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function clock(seconds) {
  const s = Math.floor(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// forget buttons: confirm, POST /api/forget, then go on
function setupForget() {
  $$("[data-forget]").forEach((button) => button.addEventListener("click", async (event) => {
    event.preventDefault();
    const kind = button.dataset.forget, id = button.dataset.id;
    if (!confirm(`Forget ${kind} ${id} and everything derived from it? This cannot be undone.`)) return;
    const body = {}; body[kind] = kind === "video" ? id : Number(id);
    await api("POST", "/api/forget", body);
    status(`forgot ${kind} ${id}`);
    if (button.dataset.then) location.href = button.dataset.then; else location.reload();
  }));
}

// the player: ?t= on load, and every .seek link
function seek(t) {
  const player = $("#player");
  $$(".clip").forEach((clip) => clip.classList.toggle("current",
    t >= Number(clip.dataset.start) && t < Number(clip.dataset.end)));
  if (!player) return;
  const go = () => { player.currentTime = t; };
  if (player.readyState >= 1) go(); else player.addEventListener("loadedmetadata", go, { once: true });
}

function setupPlayer() {
  $$(".seek").forEach((link) => link.addEventListener("click", (event) => {
    event.preventDefault();
    seek(Number(link.dataset.t));
  }));
  const t = new URLSearchParams(location.search).get("t");
  if (t !== null) seek(Number(t));
  $$("button.play").forEach((button) => button.addEventListener("click", () => {
    const audio = new Audio(button.dataset.audio);
    audio.play().then(() => status(`playing ${button.dataset.audio}`)).catch((e) => status(`cannot play: ${e}`));
  }));
}

// character page: rename, merge, split
function setupCharacter() {
  const rename = $("#rename");
  if (rename) rename.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = rename.elements.name.value.trim();
    await api("PATCH", `/api/characters/${rename.dataset.character}`, { name });
    location.reload();
  });
  $$("form.merge").forEach((form) => form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await api("POST", `/api/entities/${form.dataset.keep}/merge`, { absorb: Number(form.elements.absorb.value) });
    location.reload();
  }));
  $$("form.split").forEach((form) => form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const ids = $$("input[name=obs]:checked", form).map((box) => Number(box.value));
    if (!ids.length) { status("select observations to split off"); return; }
    const entity = await api("POST", `/api/entities/${form.dataset.entity}/split`, { observation_ids: ids });
    status(`split into ${entity.tag}`);
    location.reload();
  }));
}

// ask page: stream the steps (SSE over fetch), then show the answer with citations
function evidenceHtml(items) {
  return "<ol class=\"evidence\">" + items.map((e) => {
    const href = `/videos/${encodeURIComponent(e.video_id)}?t=${e.start_s}#clip-${e.clip_index}`;
    const cited = e.cited ? " cited" : "";
    return `<li class="memory${cited}"><a class="citation" href="${href}">${escapeHtml(e.video_id)} CLIP ${e.clip_index} ${clock(e.start_s)}</a> ${escapeHtml(e.text)}</li>`;
  }).join("") + "</ol>";
}

function stepHtml(step) {
  if (step.type === "thought") return `<div class="step thought">round ${step.round} · thinks: ${escapeHtml(step.text)}</div>`;
  if (step.type === "action") return `<div class="step action">round ${step.round} · ${escapeHtml(step.tool)}: ${escapeHtml(step.content)}</div>`;
  if (step.type === "observation") {
    const hits = step.result ? (step.result.clips || []).flatMap((c) => c.hits).length : 0;
    return `<div class="step observation">round ${step.round} · ${step.error ? "error: " + escapeHtml(step.error) : hits + " memories found"}</div>`;
  }
  return "";
}

function showAnswer(answer) {
  const box = $("#answer");
  box.hidden = false;
  box.innerHTML = `<h2>Answer</h2><p class="answer-text">${escapeHtml(answer.text || "(no answer)")}</p>` +
    `<p class="muted">${answer.mode} mode · ${answer.rounds} rounds · ${answer.searches.length} searches</p>` +
    `<h3>Evidence</h3>` + evidenceHtml(answer.evidence);
}

async function ask(question, video) {
  $("#steps").innerHTML = ""; $("#answer").hidden = true; status("asking…");
  const body = { question }; if (video) body.video_id = video;
  const response = await fetch("/api/ask/stream", { method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!response.ok) { const data = await response.json(); status(`${data.message} (${data.hint})`); return; }
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
      const event = (frame.match(/^event: (.*)$/m) || [])[1];
      const data = JSON.parse((frame.match(/^data: (.*)$/m) || [])[1] || "{}");
      if (event === "answer") showAnswer(data);
      else if (event === "error") status(`${data.message} (${data.hint})`);
      else $("#steps").insertAdjacentHTML("beforeend", stepHtml(data));
    }
  }
  status("answered");
}

async function search(query, video) {
  const body = { query, k: 10 }; if (video) body.video_id = video;
  const result = await api("POST", "/api/search", body);
  const hits = (result.clips || []).flatMap((c) => c.hits);
  $("#answer").hidden = false;
  $("#answer").innerHTML = `<h2>${hits.length} memories</h2>` + evidenceHtml(hits.map((h) => ({ ...h, cited: h.matched })));
  status("searched");
}

function setupAsk() {
  const form = $("#ask-form");
  if (!form) return;
  form.addEventListener("submit", (event) => { event.preventDefault(); ask($("#question").value, $("#video").value); });
  $("#search-button").addEventListener("click", () => search($("#question").value, $("#video").value));
}

document.addEventListener("DOMContentLoaded", () => {
  setupForget(); setupPlayer(); setupCharacter(); setupAsk();
});
