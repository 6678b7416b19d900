/*
 * The chat page: wires the socket, the composer, the thread, the sidebar (sessions and
 * topics), the inspector and the lifecycle triggers together. Everything it calls comes
 * from the server's config (config.js); everything it shows of a message comes from the
 * server's payloads.
 *
 * The page opens on the last page of the active topic (config.page_size messages); "Load
 * earlier messages" reads the page before it (?before=<seq of the first one shown>). When
 * the browser shows the page again from its back-forward cache, everything is read again:
 * the copy in that cache is as old as the moment the page was left.
 *
 * After a reconnect the page reads topics and messages again, since events may have been
 * missed; what was read is the truth, and a reply still streaming is kept only while the
 * topic's last stored message still waits for it (one bubble, never two).
 */
import { config, initial, url } from "./config.js";
import { createApi, toast, announce, results, copyText } from "./util.js";
import { installPreferences, installShortcuts } from "./page-prefs.js";
import { createEvaluator, installExitTriggers } from "./lifecycle.js";
import { createTopics } from "./topics.js";
import { createSessions } from "./sessions.js";
import { createThread } from "./thread.js";
import { undoFactChange } from "./thread-memory.js";
import { createInspector } from "./inspector.js";
import { memoryPanel } from "./panel-memory.js";
import { factsPanel } from "./panel-facts.js";
import { notesPanel } from "./panel-notes.js";
import { contextPanel } from "./panel-context.js";
import { createSocket } from "./socket.js";
import { createComposer } from "./composer.js";
import { createModelBadge } from "./model-badge.js";

const sessionId = config.session_id;
const agentName = initial.session.agent_name;
const pageSize = config.page_size;
const api = createApi();
const $ = (id) => document.getElementById(id);
// A turn that sends nothing for this long is not shown as working forever.
const WORKING_WATCHDOG_MS = 120000;

// --- state --------------------------------------------------------------------------------
let working = false;
let watchdog = null;
let viewedId = null; // the topic whose messages are shown
let viewedMessages = [];
let hasEarlier = false; // the viewed topic has messages before the first one shown
let restoredDraft = null; // a sent message given back to the composer when the socket dropped

// --- parts ----------------------------------------------------------------------------------
const evaluator = createEvaluator({ url: url("sessionEvaluate", { session_id: sessionId }), csrfToken: config.csrfToken });
installExitTriggers(evaluator);

const topics = createTopics({ list: $("topic-list"), api, onOpen: (id) => openTopic(id), onDeleted: topicDeleted });
const sessions = createSessions({ list: $("session-list"), api, currentId: sessionId, onChanged: showSessionName });
const thread = createThread({
  root: $("thread"),
  scroller: $("thread-scroll"),
  agentName,
  sessionId,
  onRetry: retry,
  onOpenTopic: (id) => openTopic(id),
  onOpenPanel: (name) => $("tab-" + name).click(),
  onUndoChange: async (change) => {
    await undoFactChange(api, sessionId, change);
    inspector.refresh("facts", "context");
  },
  onLoadEarlier: () => loadEarlier(),
  onRegenerate: regenerate,
  onEdit: editAndResend,
});
const inspector = createInspector({
  memory: memoryPanel({
    api,
    sessionId,
    agentId: initial.session.agent_id,
    agentName,
    onOpenTopic: (id) => openTopic(id),
    // An entry of this session changed in the memory panel: the topic list shows it too.
    onTopicChanged: (payload, fromSession) => {
      if (fromSession !== sessionId) return;
      topics.upsert(payload);
      if (payload.id === viewedId) $("conv-title").textContent = topics.title(payload.id);
    },
    reload: () => inspector.refresh("memory"),
  }),
  facts: factsPanel({ api, sessionId, agentName, onOpenTopic: (id) => openTopic(id), show: (nodes) => inspector.show("facts", nodes), reload: () => inspector.refresh("facts") }),
  notes: notesPanel({ api, agentName, topicForNotes: () => viewedId, topicTitle: (id) => topics.title(id) }),
  context: contextPanel({ api, sessionId, onOpenTopic: (id) => openTopic(id) }),
});
const socket = createSocket({
  path: url("socket", { session_id: sessionId }),
  onEvent: (event) => handlers[event.type]?.(event),
  onOpen: (again) => {
    updateComposer();
    if (again) resync();
  },
  onClose: socketClosed,
  onState: showConnection,
});
// The model badge follows the local model's preparation, and the user's pick of a model.
createModelBadge({ api, sessionId, toast, onChanged: () => inspector.refresh("context") });
const composer = createComposer({
  form: $("composer"),
  input: $("composer-input"),
  sendButton: $("send"),
  statusLine: $("composer-status"),
  counter: $("composer-counter"),
  limit: config.limits.messageChars,
  draftKey: "driftless:draft:" + sessionId,
  onSubmit: submit,
  onStop: stop,
  onReconnect: () => socket.reconnectNow(),
});

function topicDeleted(id) {
  if (id === viewedId) reloadActive();
  inspector.refresh("memory", "context");
}

const messagesUrl = (id, before) => url("topicMessages", { topic_id: id }, { limit: pageSize, before });

/** The session's name, as the server names it in the sessions list. */
function showSessionName() {
  const name = sessions.name(sessionId);
  if (!name) return;
  $("session-name").textContent = name;
  document.title = name + " · " + agentName + " · Driftless";
}

// --- viewing topics -------------------------------------------------------------------------
function previousLink(id) {
  const previous = topics.previousOf(id);
  return previous === null ? null : { id: previous, title: topics.title(previous) };
}

/** Whether a topic's stored messages still wait for a reply (its turn may be running). */
function awaitsReply(messages) {
  const last = messages[messages.length - 1];
  if (!last) return false;
  return last.role === "user" || last.role === "tool" || (last.role === "assistant" && (last.tool_calls || []).length > 0);
}

function showTopic(id, messages, { earlier = messages.length >= pageSize, keepScroll = false } = {}) {
  const active = id === topics.activeId();
  viewedId = id;
  viewedMessages = messages;
  hasEarlier = earlier;
  topics.setViewed(id);
  $("conv-title").textContent = topics.title(id);
  $("viewing-past").hidden = active;
  $("viewing-past-text").textContent = "You are reading “" + topics.title(id) + "”, an earlier topic.";
  showTarget(active);
  thread.render(messages, {
    previous: active && !earlier ? previousLink(id) : null,
    readOnly: !active,
    earlier,
    keepScroll,
    keepStream: active && awaitsReply(messages),
  });
  inspector.refresh("notes");
}

/** While an earlier topic is read, the composer says where a message goes: the active topic. */
function showTarget(active) {
  const target = $("composer-target");
  target.hidden = active;
  if (!active) target.textContent = "Your message goes to the active topic, “" + topics.title(topics.activeId()) + "”. To continue “" + topics.title(viewedId) + "” instead, resume it first.";
}

/** Resume the topic being read: it becomes the active one, and the composer writes to it. */
async function resumeViewed() {
  const id = viewedId;
  if (id === topics.activeId() || working) return;
  try {
    topics.upsert(await api.post(url("topicResume", { topic_id: id })));
    await reloadActive();
    announce("Resumed “" + topics.title(id) + "”: your next message continues it.");
    $("composer-input").focus();
  } catch (err) {
    toast("Could not resume that topic: " + err.message);
  }
}

async function loadEarlier() {
  if (!hasEarlier || !viewedMessages.length) return;
  const id = viewedId;
  try {
    const older = results(await api.get(messagesUrl(id, viewedMessages[0].seq)));
    if (viewedId !== id) return;
    showTopic(id, older.concat(viewedMessages), { earlier: older.length >= pageSize, keepScroll: true });
    announce(older.length ? older.length + " earlier messages loaded." : "There are no earlier messages.");
  } catch (err) {
    toast("Could not load earlier messages: " + err.message);
  }
}

async function openTopic(id) {
  closeDrawers();
  if (id === topics.activeId()) {
    if (viewedId !== id) await reloadActive();
    return;
  }
  try {
    showTopic(id, results(await api.get(messagesUrl(id))));
  } catch (err) {
    toast("Could not open that topic: " + err.message);
  }
}

/** Read the active topic again. `quiet`: a failure is not worth a toast (a resync retries). */
async function reloadActive({ quiet = false } = {}) {
  const id = topics.activeId();
  try {
    showTopic(id, results(await api.get(messagesUrl(id))));
    return true;
  } catch (err) {
    if (!quiet) toast("Could not load the conversation: " + err.message);
    return false;
  }
}

/** After a reconnect: events may have been missed, so read the state again. */
async function resync() {
  const wasViewingActive = viewedId === topics.activeId();
  try {
    const list = results(await api.get(url("sessionTopics", { session_id: sessionId })));
    list.forEach((topic) => topics.upsert(topic));
    if (wasViewingActive || !topics.get(viewedId)) await reloadActive({ quiet: true });
    else await openTopic(viewedId);
    // A turn still running announces itself again with its next delta.
    setWorking(awaitsReply(viewedMessages) && thread.streamedText() !== "");
    // The message given back to the composer had reached the server after all.
    const lastUser = [...viewedMessages].reverse().find((message) => message.role === "user");
    if (restoredDraft !== null && lastUser && lastUser.content === restoredDraft && composer.value.trim() === restoredDraft) {
      composer.clear();
      toast("Your message had arrived before the connection dropped.");
    }
    restoredDraft = null;
    inspector.refresh("memory", "facts", "notes", "context");
    await sessions.refresh();
  } catch (err) {
    // The server may still be starting: the next reconnect (or the tab's return) reads again.
    console.warn("resync failed", err);
  }
}

// --- working state --------------------------------------------------------------------------
function setWorking(state) {
  working = Boolean(state);
  thread.setWorking(viewedId === topics.activeId() ? state : false);
  clearTimeout(watchdog);
  if (working) watchdog = setTimeout(() => setWorking(false), WORKING_WATCHDOG_MS);
  updateComposer();
}

/** Stop the reply being written (the Stop button, Esc): what streamed is kept, marked stopped. */
function stop() {
  if (!working || !send({ type: "turn.cancel" })) return;
  announce("Stopping the reply.");
}

/** Replace the last reply: the server takes it out (message.deleted) and answers again. */
function regenerate() {
  if (working || !send({ type: "turn.regenerate" })) return;
  thread.clearFailure();
  setWorking(true);
}

/** Edit and resend your last message: the server replaces it and its answer, then answers. */
function editAndResend(message, content) {
  if (working || !send({ type: "message.edit", message_id: message.id, content })) return;
  thread.clearFailure();
  thread.addPending(content);
  setWorking(true);
}

function retry() {
  if (!send({ type: "turn.retry" })) return;
  thread.clearFailure();
  setWorking(true);
}

// --- events -----------------------------------------------------------------------------
const handlers = {
  "message.created"({ message }) {
    if (message.topic_id === viewedId && !thread.has(message.id)) {
      viewedMessages.push(message);
      thread.append(message);
    }
    if (message.role === "user") {
      evaluator.reset();
      if (message.topic_id === topics.activeId()) setWorking(true);
    } else if (message.role === "assistant" && (message.tool_calls || []).length) {
      setWorking(agentName + " is using " + (message.tool_calls.length === 1 ? "a tool…" : "tools…"));
    } else if (message.role === "tool") {
      if (message.tool_name === "important_info") inspector.refresh("facts");
      if (message.tool_name === "notes") inspector.refresh("notes");
      if (message.tool_name === "manage_topic_memory") inspector.refresh("memory");
    }
  },
  "message.deleted"({ topic_id: topicId, message_ids: ids }) {
    if (topicId !== viewedId) return;
    const gone = new Set(ids);
    viewedMessages = viewedMessages.filter((message) => !gone.has(message.id));
    thread.remove(ids);
  },
  "turn.started"() {
    thread.clearFailure();
    setWorking(true);
  },
  "reply.delta"({ turn_id: turnId, delta, html }) {
    if (viewedId === topics.activeId()) thread.delta(turnId, delta, html);
    if (!working) setWorking(true);
  },
  "turn.done"({ ok }) {
    thread.endStream();
    if (ok) setWorking(false);
    inspector.refresh("context");
    sessions.refresh().catch(() => {});
  },
  "turn.error"({ error, retryable }) {
    thread.endStream();
    setWorking(false);
    thread.showFailure(error, retryable);
  },
  "topic.created"({ topic, previous, relocated_message_ids: relocated }) {
    const wasViewingActive = viewedId === topics.activeId();
    if (previous) topics.upsert(previous);
    topics.upsert(topic, { fresh: true });
    evaluator.reset();
    if (wasViewingActive) {
      const moved = new Set(relocated || []);
      const kept = viewedMessages.filter((message) => moved.has(message.id)).map((message) => ({ ...message, topic_id: topic.id }));
      showTopic(topic.id, kept, { earlier: false });
    }
    announce(topic.origin === "drift" ? "The conversation moved to a new topic." : "New topic started.");
    inspector.refresh("memory", "notes", "context");
    sessions.refresh().catch(() => {});
  },
  "topic.updated"({ topic, reason }) {
    const wasViewingActive = viewedId === topics.activeId();
    topics.upsert(topic);
    if (topic.id === viewedId) $("conv-title").textContent = topics.title(topic.id);
    if (reason === "resumed" && topic.is_active) {
      // Resumed (here or in another tab): who read the active topic follows it.
      if (wasViewingActive && viewedId !== topic.id) reloadActive();
      else showTarget(viewedId === topics.activeId());
    }
    if (reason === "curation" || reason === "summary") inspector.refresh("memory");
    sessions.refresh().catch(() => {});
  },
  "topic.deleted"({ topic_id: id }) {
    if (!topics.get(id)) return; // this tab deleted it already
    topics.remove(id);
    topicDeleted(id);
  },
  "session.deleted"() {
    toast("This session was deleted.");
    setTimeout(() => location.assign(url("home")), 1500);
  },
  error({ code, message }) {
    const back = thread.takeBackPending();
    if (back !== null) composer.restore(back);
    if (code !== "turn_in_progress") setWorking(false);
    if (code === "events_unavailable") {
      // What was sent is stored; the socket closes and the page re-syncs on reconnect.
      composer.showStatus("Live updates paused: " + message);
      return;
    }
    toast(code === "turn_in_progress" ? "Wait for the reply to finish, then send again." : "Not sent: " + message);
  },
};

// --- the connection -------------------------------------------------------------------------
function showConnection(state, { retryInMs = 0, again = false } = {}) {
  const conn = $("conn");
  const words = { connecting: again ? "Reconnecting…" : "Connecting…", open: "Connected", closed: "Offline", ended: "Disconnected" };
  conn.dataset.state = state === "ended" ? "closed" : state;
  conn.textContent = words[state];
  if (state === "closed") {
    composer.showStatus("Disconnected: reconnecting in " + Math.max(1, Math.round(retryInMs / 1000)) + " s. Your draft is kept.", true);
  } else if (state === "ended") {
    composer.showStatus("This session is not available to you any more. Log in again and reload the page.");
  }
  composer.set({ open: state === "open", ended: state === "ended" });
}

function socketClosed() {
  // A message not yet acknowledged may not have arrived: give it back to the composer.
  const back = thread.takeBackPending();
  if (back !== null && composer.restore(back)) restoredDraft = back;
  evaluator.trigger();
  updateComposer();
}

function send(frame) {
  if (socket.send(frame)) return true;
  composer.showStatus("Not connected: your message is kept here and can be sent once the connection is back.", true);
  return false;
}

window.addEventListener("online", () => socket.reconnectNow());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState !== "visible") return;
  socket.reconnectNow();
  sessions.refresh().catch(() => {});
});
// Shown again from the back-forward cache: that copy is as old as the moment the page was
// left, so read everything again (and reconnect: the socket was closed on the way out).
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  if (socket.connected) resync();
  else socket.reconnectNow();
});

// --- the composer -----------------------------------------------------------------------------
function updateComposer() {
  composer.set({ open: socket.isOpen(), working });
}

async function submit(content) {
  if (viewedId !== topics.activeId()) await reloadActive();
  if (!send({ type: "message.send", content })) return;
  thread.addPending(content);
  composer.clear();
  evaluator.reset();
  thread.clearFailure();
  setWorking(true);
}

$("new-topic").addEventListener("click", () => {
  if (working) {
    toast("Wait for the reply to finish before starting a new topic.");
    return;
  }
  if (send({ type: "topic.new" })) composer.focus();
});
$("back-to-active").addEventListener("click", () => reloadActive());
$("resume-topic").addEventListener("click", () => resumeViewed());

// --- drawers on narrow screens ----------------------------------------------------------------
const app = document.querySelector(".app");
function closeDrawers() {
  app.classList.remove("show-sidebar", "show-inspector");
  document.querySelectorAll("[data-toggle]").forEach((button) => button.setAttribute("aria-expanded", "false"));
}
document.querySelectorAll("[data-toggle]").forEach((button) => {
  button.addEventListener("click", () => {
    const cls = "show-" + button.dataset.toggle;
    const open = !app.classList.contains(cls);
    closeDrawers();
    app.classList.toggle(cls, open);
    button.setAttribute("aria-expanded", String(open));
  });
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.shiftKey) return; // Shift+Esc: the message box
  if (working && !event.defaultPrevented) stop();
  closeDrawers();
});

// --- the user's preferences (the brain legend, the theme) and the keyboard shortcuts --------------
installPreferences({ api, preferences: initial.preferences || {} });
installShortcuts({
  newTopic: () => $("new-topic").click(),
  copyLastReply: async () => {
    const reply = [...thread.messages()].reverse().find((message) => message.role === "assistant" && message.content && !(message.tool_calls || []).length);
    return Boolean(reply) && copyText(reply.content);
  },
});

// --- start --------------------------------------------------------------------------------------
topics.load(initial.topics);
setInterval(() => {
  if (document.visibilityState === "visible") sessions.refresh().catch(() => {});
}, 60000);
showTopic(topics.activeId(), initial.messages);
// A link from search opens the session at a topic: /sessions/<id>/#topic-<topic id>.
const linked = /^#topic-(\d+)$/.exec(location.hash);
if (linked && Number(linked[1]) !== topics.activeId()) openTopic(Number(linked[1]));
composer.focus();
socket.connect();
