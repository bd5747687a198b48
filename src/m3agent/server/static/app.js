// m3agent inspector: edits through the REST API, ingest with live progress, the streamed ask with a short
// history, and the player seeking to clip times. No inline script or style anywhere: a strict CSP holds.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const POLL_MS = 1000; // jobs refresh while one is queued or running
const HISTORY_KEY = "m3agent.ask.history", PENDING_KEY = "m3agent.ask.pending", HISTORY_SIZE = 10;

function status(text) { const el = $("#status"); if (el) el.textContent = text; }

// an element with attributes and children (strings become text: nothing is parsed as HTML)
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value; else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// errors as a browser user reads them, by the rules of server/web/browser_text.py: a title in words for the API's
// error name (the page carries the table, data-titles), no process ids or server paths in the message, and a
// hint for a person, not a program (no endpoint, no HTTP header, no Ctrl-C, no pid, no path on the server)
const UNFIT_HINT = /\/api\/|\/docs\b|\b(GET|POST|PATCH|PUT|DELETE) \/|\b(if-match|etag)\b|ctrl-c|\bpid\b|(^|[\s(])\/[\w.-]+\//i;
const PROCESS = /\s*\((?:pid|process) \d+[^)]*\)/gi;
const SERVER_PATH = /(?<![\w:/.])\/(?:[\w.-]+\/)+([\w.-]+)/g;
const BROWSER_HINTS = { 403: "this server does not allow that; choose something it allows, or ask whoever runs it",
  404: "check the address, or go back to the videos",
  409: "reload the page to see the memory as it is now, then try again",
  412: "reload the page to see the change, then edit again if it is still wrong" };
const BROWSER_HINT = "try again; if it keeps failing, tell whoever runs this server";

function errorTitle(name) {
  const box = $("#problem");
  let titles = {};
  try { titles = JSON.parse((box && box.dataset.titles) || "{}"); } catch (e) { titles = {}; }
  if (titles[name]) return titles[name];
  if (!/^[A-Z][A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*$/.test(name)) return name;  // not a class name: already words
  const words = name.replace(/Error$/, "").match(/[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+/g) || [];
  if (!words.length) return "Something went wrong";
  const text = words.map((w) => (w.length > 1 && w === w.toUpperCase() ? w : w.toLowerCase())).join(" ");
  return text[0].toUpperCase() + text.slice(1);
}

function browserMessage(text) { return String(text || "").replace(PROCESS, "").replace(SERVER_PATH, "$1"); }

function browserHint(text, status) {
  return text && !UNFIT_HINT.test(text) ? text : BROWSER_HINTS[status] || BROWSER_HINT;
}

// errors: the documented {error, message, hint}, shown in the page as a browser user reads them
function problemOf(status, data) {
  if (data && typeof data.message === "string") {
    return { error: errorTitle(data.error || `HTTP ${status}`), message: browserMessage(data.message),
      hint: browserHint(data.hint || "", status) };
  }
  if (data && Array.isArray(data.detail)) {
    const first = data.detail[0] || {};
    const where = (first.loc || []).filter((part) => part !== "body").join(".");
    return { error: "invalid request", message: `${where ? where + ": " : ""}${first.msg || "not accepted"}`,
      hint: "correct the field and send it again" };
  }
  return { error: `HTTP ${status}`, message: "the server answered with an error and no explanation",
    hint: "try again; the server's log says more" };
}

// a problem comes from what the user did (cleared by their next success) or from a background refresh (the
// jobs poll), which clears only its own: a poll never hides an error the user has not read
function showProblem(problem, source = "user") {
  const box = $("#problem");
  status(problem.message);
  if (!box) return;
  box.dataset.source = source;
  $(".problem-error", box).textContent = problem.error;
  $(".problem-message", box).textContent = problem.message;
  $(".problem-hint", box).textContent = problem.hint;
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
}

function clearProblem(source = "user") {
  const box = $("#problem");
  if (box && (source === "user" || box.dataset.source === source)) box.hidden = true;
}

class ApiError extends Error {
  constructor(problem) { super(problem.message); this.problem = problem; }
}

const OFFLINE = { error: "no answer", message: "the server did not answer",
  hint: "check that m3agent serve is still running, then try again" };

async function api(method, url, body, source = "user", headers = {}) {
  let response;
  try {
    response = await fetch(url, {
      method, headers: body ? { "content-type": "application/json", ...headers } : headers,
      body: body ? JSON.stringify(body) : undefined, credentials: "same-origin",
    });
  } catch (e) {
    showProblem(OFFLINE, source);
    throw new ApiError(OFFLINE);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const problem = problemOf(response.status, data);
    showProblem(problem, source);
    throw new ApiError(problem);
  }
  clearProblem(source);
  return data;
}

// run an async handler; its ApiError is already shown, anything else is shown as a problem too
function guarded(handler) {
  return async (event) => {
    try { await handler(event); } catch (e) {
      if (!(e instanceof ApiError)) showProblem({ error: "error", message: String(e.message || e), hint: "reload the page and try again" });
    }
  };
}

// "1 clip", "2 clips"; many for a plural that is not one + s ("memory", "memories")
function plural(count, one, many = `${one}s`) { return `${count} ${count === 1 ? one : many}`; }

function clock(seconds) {
  const s = Math.floor(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// forget buttons (also on rows added later): confirm, POST /api/forget, then go on
function setupForget() {
  document.addEventListener("click", guarded(async (event) => {
    const button = event.target.closest("[data-forget]");
    if (!button) return;
    event.preventDefault();
    const kind = button.dataset.forget, id = button.dataset.id;
    if (!confirm(`Forget ${kind} ${id} and everything derived from it? This cannot be undone.`)) return;
    const body = {}; body[kind] = kind === "video" ? id : Number(id);
    await api("POST", "/api/forget", body);
    status(`forgot ${kind} ${id}`);
    if (button.dataset.then) location.href = button.dataset.then; else location.reload();
  }));
  const close = $("#problem .problem-close");
  if (close) close.addEventListener("click", () => clearProblem());
}

// the player: ?t= on load, every .seek link, a notice when the browser cannot play the file
function seek(t) {
  const player = $("#player");
  $$(".clip").forEach((clip) => clip.classList.toggle("current",
    t >= Number(clip.dataset.start) && t < Number(clip.dataset.end)));
  if (!player) return;
  const go = () => { player.currentTime = t; };
  if (player.readyState >= 1) go(); else player.addEventListener("loadedmetadata", go, { once: true });
}

// a ▶ plays its snippet; a voice line (data-t: its start) that kept no audio plays in the video player instead
async function playAudio(url, t = null) {
  const audio = new Audio(url);
  try {
    await audio.play();
    status(`playing ${url}`);
  } catch (e) {
    const response = await fetch(url, { credentials: "same-origin" }).catch(() => null);
    if (!response) { showProblem(OFFLINE); return; }
    if (response.status === 404 && t !== null && playFrom(t)) return;
    if (!response.ok) showProblem(problemOf(response.status, await response.json().catch(() => null)));
    else showProblem({ error: "cannot play", message: String(e), hint: "this browser could not decode the audio" });
  }
}

function playFrom(t) {
  const player = $("#player");
  if (!player || player.hidden) return false;
  seek(t);
  pinPlayer();
  player.play().catch(() => null);
  status(`this line kept no audio of its own: the video plays from ${clock(t)}`);
  return true;
}

// a memory or evidence link that seeks keeps the player in view (sticky) and marks the memory it came from
function pinPlayer() { const box = $("#player-box"); if (box) box.classList.add("pinned"); }

function cite(memory) {
  $$(".memory.cited").forEach((node) => node.classList.remove("cited"));
  memory.classList.add("cited");
}

// clicks on .seek links and ▶ buttons, delegated: rows a refresh brings in work as well
function onSeekOrPlay(event) {
  const link = event.target.closest(".seek"), button = event.target.closest("button.play");
  if (link) {
    event.preventDefault();
    seek(Number(link.dataset.t));
    pinPlayer();
    const memory = link.closest(".memory");
    if (memory) cite(memory);
  } else if (button) {
    playAudio(button.dataset.audio, button.dataset.t === undefined ? null : Number(button.dataset.t));
  }
}

function setupPlayer() {
  document.addEventListener("click", onSeekOrPlay);
  const params = new URLSearchParams(location.search), t = params.get("t");
  if (t !== null) { seek(Number(t)); pinPlayer(); }
  const cited = params.get("m") && $(`.memory[data-memory="${CSS.escape(params.get("m"))}"]`);
  if (cited) { cite(cited); cited.scrollIntoView({ block: "center" }); }
  const player = $("#player");
  if (player) player.addEventListener("error", () => { $("#player-failed").hidden = false; player.hidden = true; });
  $$(".strip .span").forEach((span) => {  // CSSOM, not a style attribute: allowed by a strict CSP
    span.style.left = `${Number(span.dataset.left)}%`;
    span.style.width = `${Number(span.dataset.width)}%`;
  });
}

// beside the player: who is on screen and who speaks at its current time (GET /api/videos/{id}/at), asked
// again when the time has moved a quarter second and the player has been still for AT_WAIT_MS
const AT_WAIT_MS = 300;

function onScreenNodes(moment) {
  const seen = moment.on_screen.map((s) => el("span", { class: "face", "data-character": s.character_id },
    el("img", { src: `/api/entities/${s.entity_id}/media/0`, alt: "" }),
    el("a", { class: "person", href: `/characters/${s.character_id}`, "data-tag": `<character_${s.character_id}>`,
      title: `<character_${s.character_id}>` }, s.person), el("small", { class: "muted" }, s.horizontal)));
  const heard = moment.speaking.map((u) => el("span", { class: "speaking", "data-character": u.character_id },
    "speaking: ", el("a", { class: "person", href: `/characters/${u.character_id}`,
      "data-tag": `<character_${u.character_id}>`, title: `<character_${u.character_id}>` }, u.person),
    ` “${u.text}”`));
  return seen.length || heard.length ? [...seen, ...heard] : [el("span", { class: "muted" }, "nobody on screen")];
}

function setupOnScreen() {
  const box = $("#on-screen"), player = $("#player");
  if (!box || !player) return;
  let timer = null, asked = null;
  const show = async () => {
    const t = Math.round(player.currentTime * 4) / 4;
    if (t === asked) return;
    asked = t;
    const url = `/api/videos/${encodeURIComponent(box.dataset.video)}/at?t=${t}`;
    const response = await fetch(url, { credentials: "same-origin" }).catch(() => null);
    if (!response || !response.ok || t !== asked) return;
    const who = el("span", { class: "who", "data-t": t }, onScreenNodes(await response.json()));
    $(".who", box).replaceWith(who);
    namePeople(who);
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(show, AT_WAIT_MS); };
  ["timeupdate", "seeked", "loadeddata"].forEach((name) => player.addEventListener(name, later));
}

// the swimlanes under the player: bars placed by their percentages (CSSOM), the playhead and the bars under
// it follow playback, a click on a lane seeks to the time under the pointer
const SEEN_SLACK_S = 0.5; // as the graph's AT_SLACK_S: a face sampled this close to a time is on screen at it

function underPlayhead(bar, t) {
  const start = Number(bar.dataset.start), end = Number(bar.dataset.end);
  if (bar.classList.contains("seen")) return t >= start - SEEN_SLACK_S && t <= end + SEEN_SLACK_S;
  return t >= start && (t < end || (t === end && !bar.nextElementSibling.classList.contains("bar")));
}

function showShot(bar) {
  const box = $("#shot-now");
  if (!box || box.dataset.shot === (bar ? bar.dataset.start : "")) return;
  box.dataset.shot = bar ? bar.dataset.start : "";
  if (!bar) { box.replaceChildren(); return; }
  const people = Number(bar.dataset.people);
  const cut = bar.classList.contains("opens") && bar.previousElementSibling !== null;
  box.replaceChildren(el("b", {}, `Shot ${clock(Number(bar.dataset.start))}–${clock(Number(bar.dataset.end))}`),
    ` · ${cut ? "after a scene change · " : ""}${bar.dataset.kind} · ${people} ${people === 1 ? "person" : "people"}: `,
    ...withPeople(bar.dataset.summary || "no summary"));
  namePeople(box);
}

function followLanes(lanes, t) {
  const duration = Number(lanes.dataset.duration);
  lanes.dataset.t = t;
  $$(".playhead", lanes).forEach((head) => { head.style.left = `${Math.min(100, (100 * t) / duration)}%`; });
  $$(".bar", lanes).forEach((bar) => bar.classList.toggle("current", underPlayhead(bar, t)));
  $$(".lane", lanes).forEach((lane) => lane.classList.toggle("active", $(".bar.current", lane) !== null));
  showShot($("#lane-shots .bar.current", lanes));
}

// the lanes as rendered (again after a refresh brings new ones): bars placed, tracks seek, people named
function layoutLanes() {
  const lanes = $("#swimlanes"), player = $("#player");
  if (!lanes) return;
  const duration = Number(lanes.dataset.duration);
  $$(".bar", lanes).forEach((bar) => {
    bar.style.left = `${Number(bar.dataset.left)}%`;
    bar.style.width = `${Number(bar.dataset.width)}%`;
  });
  $$(".track", lanes).forEach((track) => track.addEventListener("click", (event) => {
    const box = track.getBoundingClientRect();
    seek(Math.min(duration, Math.max(0, ((event.clientX - box.left) / box.width) * duration)));
  }));
  namePeople(lanes);
  followLanes(lanes, player ? player.currentTime : 0);
}

function setupLanes() {
  const player = $("#player");
  const follow = () => { const lanes = $("#swimlanes"); if (lanes) followLanes(lanes, player.currentTime); };
  if (player) ["timeupdate", "seeked", "loadedmetadata"].forEach((name) => player.addEventListener(name, follow));
  layoutLanes();
}

// a video page opened while its video is ingested polls the job (#ingesting); each committed clip and the
// job's end refresh the parts of the page marked data-live (summary, swimlanes, timeline) without a reload
function ingestText(job) {
  const done = job.clips_already_done + job.clips_done;
  const soFar = job.clips_total ? `${done} of ${plural(job.clips_total, "clip")}` : plural(done, "clip");
  if (job.state === "queued") return "Waiting to be ingested; new clips appear here as they are committed.";
  if (job.state === "running") return `Being ingested: ${soFar} so far; new clips appear here as they are committed.`;
  if (job.state === "done") return `Ingested: ${plural(done, "clip")}.`;
  if (job.state === "cancelled") return `Ingest cancelled after ${plural(done, "clip")}; the clips committed stay.`;
  return `Ingest failed: ${browserMessage(job.error || "")}`;
}

async function refreshLive() {
  const response = await fetch(location.href, { credentials: "same-origin" });
  if (!response.ok) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  $$("[data-live]").forEach((node) => {
    const next = fresh.getElementById(node.id);
    if (next) node.replaceWith(document.adoptNode(next));
  });
  layoutLanes();
}

function setupLiveVideo() {
  const notice = $("#ingesting");
  if (!notice) return;
  let seen = `${notice.dataset.state}:${notice.dataset.done}`;
  const poll = async () => {
    let job;
    try { job = await api("GET", `/api/jobs/${encodeURIComponent(notice.dataset.job)}`, undefined, "poll"); } catch (e) {
      setTimeout(poll, POLL_MS * 5);
      return;
    }
    const mark = `${job.state}:${job.clips_already_done + job.clips_done}`;
    notice.dataset.state = job.state;
    notice.textContent = ingestText(job);
    if (mark !== seen) await refreshLive().catch(() => null);
    seen = mark;
    if (ACTIVE.has(job.state)) setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}

// home page: ingest (upload with its progress, or a server path), the jobs table refreshed while any runs
const ACTIVE = new Set(["queued", "running"]);
let jobStates = null; // job id -> "state:clips done" at the last poll
let polling = null;

function jobRow(job) {
  const done = job.clips_already_done + job.clips_done;
  const progress = job.clips_total
    ? el("progress", { max: job.clips_total, value: Math.min(done, job.clips_total) }) : null;
  const cancel = ACTIVE.has(job.state)
    ? el("button", { type: "button", class: "danger cancel", "data-cancel": job.id }, "Cancel") : null;
  const video = el("a", { href: `/videos/${encodeURIComponent(job.video_id)}` }, job.video_id);
  const error = job.error
    ? [browserMessage(job.error), el("span", { class: "muted" }, ` (${browserHint(job.hint || "", 0)})`)] : "";
  return el("tr", { "data-job": job.id, "data-state": job.state },
    el("td", { class: "muted" }, job.id.slice(0, 8)), el("td", { class: "wrap" }, video),
    el("td", { class: `state-${job.state}` }, job.state),
    el("td", { class: "progress-cell" }, progress,
      ` ${job.clips_total ? `${done} / ${plural(job.clips_total, "clip")}` : plural(done, "clip")}`),
    el("td", {}, job.rtf ? job.rtf.toFixed(2) : ""),
    el("td", { class: "wrap error-cell" }, error, cancel));
}

async function refreshJobs() {
  const table = $("#jobs");
  if (!table) return;
  polling = null;
  let page;
  try { page = await api("GET", "/api/jobs?limit=10", undefined, "poll"); } catch (e) {
    polling = setTimeout(refreshJobs, POLL_MS * 5);
    return;
  }
  const rows = page.items.map(jobRow);
  $("tbody", table).replaceChildren(...(rows.length ? rows
    : [el("tr", { class: "empty-row" }, el("td", { colspan: 6, class: "empty" }, "No jobs yet."))]));
  // the videos table follows every job that moved since the last poll (a clip committed, a state changed)
  const marks = new Map(page.items.map((job) => [job.id, `${job.state}:${job.clips_done}`]));
  const moved = jobStates !== null && page.items.some((job) => jobStates.get(job.id) !== marks.get(job.id));
  jobStates = marks;
  if (moved) await refreshVideos().catch(() => null);
  if (page.items.some((job) => ACTIVE.has(job.state))) polling = setTimeout(refreshJobs, POLL_MS);
}

function pollJobs() { if (polling) clearTimeout(polling); refreshJobs(); }

function videoRow(video) {
  return el("tr", { "data-video": video.video_id },
    el("td", { class: "wrap" }, el("a", { href: `/videos/${encodeURIComponent(video.video_id)}` }, video.video_id)),
    el("td", {}, video.duration_s === null ? "?" : clock(video.duration_s)),
    el("td", {}, `${video.clips_done} / ${video.clips_recorded}`),
    el("td", { class: "muted wrap col-source" }, video.source),
    el("td", {}, el("button", { class: "danger", "data-forget": "video", "data-id": video.video_id, "data-then": "/" }, "Forget")));
}

async function refreshVideos() {
  const page = await api("GET", "/api/videos?limit=1000", undefined, "poll");
  $("#videos tbody").replaceChildren(...page.items.map(videoRow));
  const empty = $("#no-videos");
  if (empty) empty.hidden = page.items.length > 0;
}

function formFields(form, names) {
  const fields = {};
  for (const name of names) {
    const input = form.elements[name];
    if (input && input.value.trim()) fields[name] = input.value.trim();
  }
  return fields;
}

function upload(form) {
  const data = new FormData();
  data.append("file", form.elements.file.files[0]);
  for (const [key, value] of Object.entries(formFields(form, ["video_id", "max_clips"]))) data.append(key, value);
  const bar = $("#upload-progress");
  bar.hidden = false; bar.value = 0;
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", "/api/jobs/upload");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) bar.value = (100 * event.loaded) / event.total;
    });
    request.addEventListener("load", () => {
      bar.hidden = true;
      let body = null;
      try { body = JSON.parse(request.responseText); } catch (e) { body = null; }
      if (request.status === 202) { clearProblem(); resolve(body); return; }
      const problem = problemOf(request.status, body);
      showProblem(problem); reject(new ApiError(problem));
    });
    request.addEventListener("error", () => { bar.hidden = true; showProblem(OFFLINE); reject(new ApiError(OFFLINE)); });
    request.send(data);
  });
}

function setupIngest() {
  const uploadForm = $("#upload-form"), pathForm = $("#path-form");
  if (uploadForm) uploadForm.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    const job = await upload(uploadForm);
    status(`queued job ${job.id.slice(0, 8)} for ${job.video_id}`);
    uploadForm.reset();
    pollJobs();
  }));
  if (pathForm && pathForm.elements.path) pathForm.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    const body = formFields(pathForm, ["path", "video_id", "max_clips"]);
    if (body.max_clips) body.max_clips = Number(body.max_clips);
    const job = await api("POST", "/api/jobs", body);
    status(`queued job ${job.id.slice(0, 8)} for ${job.video_id}`);
    pathForm.reset();
    pollJobs();
  }));
  const jobs = $("#jobs");
  if (jobs) {
    jobs.addEventListener("click", guarded(async (event) => {
      const button = event.target.closest("[data-cancel]");
      if (!button) return;
      button.disabled = true;
      const job = await api("POST", `/api/jobs/${encodeURIComponent(button.dataset.cancel)}/cancel`);
      status(`cancelling job ${job.id.slice(0, 8)}`);
      pollJobs();
    }));
    pollJobs();
  }
}

// character page: rename, merge (compared side by side, warned when seen together), link, split; undo merges
function mediaOf(entityId, kind, count) {
  const shown = Math.min(count, kind === "face" ? 4 : 2);
  return Array.from({ length: shown }, (_, i) => kind === "face"
    ? el("img", { class: "crop", src: `/api/entities/${entityId}/media/${i}`, alt: `crop ${i}` })
    : el("audio", { class: "snippet", controls: true, preload: "none", src: `/api/entities/${entityId}/media/${i}` }));
}

async function confirmMerge(form, candidate) {
  const dialog = $("#merge-dialog");
  const keep = form.dataset.keep, absorb = candidate.dataset.entity, kind = form.dataset.kind;
  const keepMedia = Number($(`#entity-${keep}`).dataset.media);
  const other = await api("GET", `/api/entities/${absorb}`);
  $$(".keep-tag", dialog).forEach((node) => { node.textContent = form.dataset.keepTag; });
  $$(".absorb-tag", dialog).forEach((node) => { node.textContent = candidate.dataset.tag; });
  $(".keep-side .media", dialog).replaceChildren(...mediaOf(keep, kind, keepMedia));
  $(".absorb-side .media", dialog).replaceChildren(...mediaOf(absorb, kind, other.media));
  const together = candidate.dataset.together;
  $(".together-warning", dialog).hidden = !together;
  $(".together-spans", dialog).textContent = together;
  $(".confirm-merge", dialog).textContent = together ? "Merge anyway" : "Merge";
  dialog.returnValue = "";
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
  return dialog.returnValue === "merge";
}

function setupCandidates() {
  $$(".candidate-filter").forEach((input) => input.addEventListener("input", () => {
    const needle = input.value.trim().toLowerCase();
    $$(".candidate", input.form).forEach((label) => {
      label.hidden = needle !== "" && !`${label.dataset.tag} ${label.dataset.name}`.toLowerCase().includes(needle);
    });
  }));
}

// a split list's crops are fetched once it is opened (an entity may have been seen thousands of times), then lazily
function showCrops(box) {
  $$("span.obs-crop[data-crop]", box).forEach((span) => span.replaceWith(el("img", {
    class: "obs-crop", src: span.dataset.crop, alt: span.dataset.alt, loading: "lazy" })));
}

function setupCharacter() {
  const rename = $("#rename");
  if (rename) rename.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    // If-Match: the version of the name this page shows; renamed meanwhile (another tab, someone else), the
    // server refuses with 412 and the banner says to what, instead of overwriting it
    const name = rename.elements.name.value.trim();
    await api("PATCH", `/api/characters/${rename.dataset.character}`, { name }, "user",
      { "if-match": rename.dataset.version });
    location.reload();
  }));
  $$("form.merge").forEach((form) => form.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    const chosen = $("input[name=absorb]:checked", form);
    if (!chosen) { status("choose who to merge"); return; }
    if (!(await confirmMerge(form, chosen.closest(".candidate")))) { status("merge cancelled"); return; }
    const kept = await api("POST", `/api/entities/${form.dataset.keep}/merge`, { absorb: Number(chosen.value) });
    location.href = `/characters/${kept.character}`;  // the character's id may change with its members
  })));
  $$("form.link-form").forEach((form) => form.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    const chosen = $("input[name=other]:checked", form);
    if (!chosen) { status("choose who to link"); return; }
    const mine = Number(form.dataset.entity), theirs = Number(chosen.value);
    const body = form.dataset.kind === "face" ? { face: mine, voice: theirs } : { face: theirs, voice: mine };
    const character = await api("POST", "/api/links", body);
    location.href = `/characters/${character.id}`;
  })));
  $$("details.split-box").forEach((box) => box.addEventListener("toggle", () => { if (box.open) showCrops(box); }));
  $$("form.split").forEach((form) => form.addEventListener("submit", guarded(async (event) => {
    event.preventDefault();
    const ids = $$("input[name=obs]:checked", form).map((box) => Number(box.value));
    if (!ids.length) { status("select observations to split off"); return; }
    const entity = await api("POST", `/api/entities/${form.dataset.entity}/split`, { observation_ids: ids });
    status(`split into ${entity.tag}`);
    location.reload();
  })));
  $$("button[data-undo]").forEach((button) => button.addEventListener("click", guarded(async () => {
    button.disabled = true;
    const restored = await api("POST", `/api/merges/${button.dataset.undo}/undo`);
    status(`${restored.tag} is back`);
    if (!$("#character-name")) { location.reload(); return; }
    const kept = await api("GET", `/api/entities/${button.dataset.keep}`);
    location.href = `/characters/${kept.character}`;
  })));
  setupCandidates();
  const merged = $("#merged-into");
  if (merged) namePeople(merged);
}

// people in text: each <character_N>/<face_N>/<voice_N> becomes a link to the person's page reading their name
// or measured description (the tag is its title), looked up once per tag with GET /api/people/{tag}
const TAG_RE = /<?(?<!\w)(character|face|voice)_(\d+)(?!\w)>?/g;
const profiles = new Map();

function withPeople(text) {
  const out = [], source = String(text ?? "");
  let last = 0;
  for (const match of source.matchAll(TAG_RE)) {
    out.push(source.slice(last, match.index));
    const tag = `<${match[1]}_${match[2]}>`;
    out.push(el("a", { class: "person", href: "/people", "data-tag": tag, title: tag }, tag));
    last = match.index + match[0].length;
  }
  out.push(source.slice(last));
  return out.filter((part) => part !== "");
}

function profileOf(tag) {
  if (!profiles.has(tag)) {
    profiles.set(tag, fetch(`/api/people/${encodeURIComponent(tag)}`, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : null)).catch(() => null));
  }
  return profiles.get(tag);
}

function personWords(profile) {
  return profile.person.name || profile.description || `unnamed person ${profile.person.character_id}`;
}

// "Ann (<character_2>)" as the server writes a named person reads "Ann", not "Ann (Ann)"
function dropRestated(link, words) {
  const before = link.previousSibling, after = link.nextSibling;
  if (!before || !after || before.nodeType !== Node.TEXT_NODE || after.nodeType !== Node.TEXT_NODE) return;
  if (!before.data.endsWith(`${words} (`) || !after.data.startsWith(")")) return;
  before.data = before.data.slice(0, -(words.length + 2));
  after.data = after.data.slice(1);
}

async function namePeople(root) {
  await Promise.all($$("a.person[data-tag]:not([data-named])", root).map(async (link) => {
    link.dataset.named = "";
    const profile = await profileOf(link.dataset.tag);
    if (!profile) { link.classList.add("unknown"); return; }
    const words = personWords(profile);
    link.textContent = words;
    link.href = `/characters/${profile.person.character_id}`;
    dropRestated(link, words);
  }));
}

// ask page: stream the steps (SSE over fetch), show the answer with citations, keep the last answers
function evidenceList(items) {
  return el("ol", { class: "evidence" }, items.map((e) => el("li", { class: `memory${e.cited ? " cited" : ""}` },
    el("a", { class: "citation", href: `/videos/${encodeURIComponent(e.video_id)}?t=${e.start_s}`
      + `${e.memory_id === undefined ? "" : "&m=" + e.memory_id}#clip-${e.clip_index}` },
      `${e.video_id} CLIP ${e.clip_index} ${clock(e.start_s)}`), " ", withPeople(e.text))));
}

function stepNode(step) {
  let text = "";
  if (step.type === "thought") text = `round ${step.round} · thinks: ${step.text}`;
  else if (step.type === "action") text = `round ${step.round} · ${step.tool}: ${step.content}`;
  else if (step.type === "observation") {
    const hits = step.result ? (step.result.clips || []).flatMap((c) => c.hits).length : 0;
    const found = step.error ? `error: ${step.error}` : `${plural(hits, "memory", "memories")} found`;
    text = `round ${step.round} · ${found}`;
  } else return null;
  return el("div", { class: `step ${step.type}` }, withPeople(text));
}

function showAnswer(answer, question) {
  const box = $("#answer");
  box.hidden = false;
  box.replaceChildren(
    el("h2", {}, "Answer"), question ? el("p", { class: "muted asked" }, question) : null,
    el("p", { class: "answer-text" }, withPeople(answer.text || "(no answer)")),
    el("p", { class: "muted" }, `${answer.mode} mode · ${plural(answer.rounds, "round")} · `
      + plural(answer.searches.length, "search", "searches")),
    el("h3", {}, "Evidence"), evidenceList(answer.evidence));
  namePeople(box);
}

function readHistory() {
  try { return JSON.parse(localStorage.getItem(HISTORY_KEY)) || []; } catch (e) { return []; }
}

function remember(question, video, answer) {
  const history = [{ question, video, answer, at: Date.now() }, ...readHistory()].slice(0, HISTORY_SIZE);
  try { localStorage.setItem(HISTORY_KEY, JSON.stringify(history)); } catch (e) { status("the browser keeps no history here"); }
  localStorage.removeItem(PENDING_KEY);
  renderHistory();
}

function renderHistory() {
  const list = $("#history");
  if (!list) return;
  const history = readHistory();
  $("#history-box").hidden = history.length === 0;
  list.replaceChildren(...history.map((entry, i) => el("li", {},
    el("button", { type: "button", class: "link", "data-history": i }, entry.question),
    el("span", { class: "muted" }, ` ${entry.video || "all videos"} · ${new Date(entry.at).toLocaleString()}`))));
}

// while an answer streams (or a search runs) its buttons are disabled and the answer is marked busy: one
// question at a time; an empty memory keeps them disabled (the page says why)
let asking = false;

function busy(on) {
  asking = on;
  const idle = !on && !$("#empty-memory");
  ["#ask-button", "#search-button", "#ask-again"].forEach((sel) => { const b = $(sel); if (b) b.disabled = !idle; });
  $("#answer").setAttribute("aria-busy", on ? "true" : "false");
  $("#steps").setAttribute("aria-busy", on ? "true" : "false");
}

async function ask(question, video) {
  if (asking) return;
  busy(true);
  try { await streamAnswer(question, video); } catch (e) {
    showProblem({ error: "Answer interrupted", message: "the connection closed before the answer was complete",
      hint: "ask again" });
  } finally { busy(false); }
}

async function streamAnswer(question, video) {
  $("#steps").replaceChildren(); $("#answer").hidden = true; $("#interrupted").hidden = true;
  clearProblem(); status("asking…");
  localStorage.setItem(PENDING_KEY, JSON.stringify({ question, video, at: Date.now() }));
  const body = { question }; if (video) body.video_id = video;
  let response;
  try {
    response = await fetch("/api/ask/stream", { method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  } catch (e) { showProblem(OFFLINE); return; }
  if (!response.ok) {
    localStorage.removeItem(PENDING_KEY);
    showProblem(problemOf(response.status, await response.json().catch(() => null)));
    return;
  }
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
      if (event === "answer") { showAnswer(data, question); remember(question, video, data); }
      else if (event === "error") { localStorage.removeItem(PENDING_KEY); showProblem(problemOf(500, data)); }
      else { const node = stepNode(data); if (node) { $("#steps").append(node); namePeople(node); } }
    }
  }
  status("answered");
}

async function search(query, video) {
  if (asking) return;
  busy(true);
  try { await searchMemories(query, video); } finally { busy(false); }
}

async function searchMemories(query, video) {
  const body = { query, k: 10 }; if (video) body.video_id = video;
  const result = await api("POST", "/api/search", body);
  const hits = (result.clips || []).flatMap((c) => c.hits);
  $("#answer").hidden = false;
  $("#answer").replaceChildren(el("h2", {}, plural(hits.length, "memory", "memories")),
    evidenceList(hits.map((h) => ({ ...h, cited: h.matched }))));
  await namePeople($("#answer"));
  status("searched");
}

function setupAsk() {
  const form = $("#ask-form");
  if (!form) return;
  form.addEventListener("submit", (event) => { event.preventDefault(); ask($("#question").value, $("#video").value); });
  $("#search-button").addEventListener("click", guarded(() => search($("#question").value, $("#video").value)));
  $("#history").addEventListener("click", (event) => {
    const button = event.target.closest("[data-history]");
    if (!button) return;
    const entry = readHistory()[Number(button.dataset.history)];
    if (entry) showAnswer(entry.answer, entry.question);
  });
  $("#ask-again").addEventListener("click", () => {
    const pending = JSON.parse(localStorage.getItem(PENDING_KEY) || "null");
    if (pending) { $("#question").value = pending.question; $("#video").value = pending.video || ""; ask(pending.question, pending.video); }
  });
  busy(false);
  renderHistory();
  const pending = JSON.parse(localStorage.getItem(PENDING_KEY) || "null");
  if (pending) {
    $("#interrupted").hidden = false;
    $("#interrupted-question").textContent = pending.question;
    $("#question").value = pending.question;
  } else {
    const last = readHistory()[0];
    if (last) showAnswer(last.answer, last.question);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setupForget(); setupPlayer(); setupOnScreen(); setupLanes(); setupLiveVideo(); setupIngest(); setupCharacter();
  setupAsk();
});
