/*
 * The chat page: wires the socket, the composer, the thread, the sidebar (sessions and
 * topics), the inspector and the lifecycle triggers together.
 *
 * The page opens on the last page of the active topic (initial.page_size messages); "Load
 * earlier messages" reads the page before it (?before=<seq of the first one shown>). When
 * the browser shows the page again from its back-forward cache, everything is read again:
 * the copy in that cache is as old as the moment the page was left.
 *
 * The socket (ws/sessions/<id>/) reconnects by itself with exponential backoff and jitter;
 * after a reconnect the page re-reads topics and messages, since events may have been
 * missed. The composer keeps the draft (also across reloads) until the server has the
 * message: a message that never got there comes back into the composer.
 */
(function () {
  "use strict";
  const D = window.Driftless;
  const initial = JSON.parse(document.getElementById("driftless-initial").textContent);
  const sessionId = initial.session.id;
  const agentName = initial.session.agent_name;
  const api = D.createApi(initial.csrf_token);

  const RECONNECT_BASE_MS = 500;
  const RECONNECT_MAX_MS = 15000;
  // A turn that sends nothing for this long is not shown as working forever.
  const WORKING_WATCHDOG_MS = 120000;
  const NO_RECONNECT_CODES = new Set([4401, 4403]);
  const draftKey = "driftless:draft:" + sessionId;

  const $ = (id) => document.getElementById(id);
  const input = $("composer-input");
  const sendButton = $("send");
  const statusLine = $("composer-status");
  const conn = $("conn");

  // --- state --------------------------------------------------------------------------------
  let socket = null;
  let everConnected = false;
  let attempts = 0;
  let reconnectTimer = null;
  let working = false;
  let watchdog = null;
  let viewedId = null; // the topic whose messages are shown
  let viewedMessages = [];
  let hasEarlier = false; // the viewed topic has messages before the first one shown
  const pageSize = initial.page_size;
  let restoredDraft = null; // a sent message given back to the composer when the socket dropped

  // --- parts ----------------------------------------------------------------------------------
  const evaluator = window.DriftlessLifecycle.createEvaluator({
    url: "/agents-api/sessions/" + sessionId + "/evaluate",
    csrfToken: initial.csrf_token,
  });
  window.DriftlessLifecycle.installExitTriggers(evaluator);

  const topics = D.createTopics({ list: $("topic-list"), api, onOpen: (id) => openTopic(id), onDeleted: topicDeleted });
  const sessions = D.createSessions({
    list: $("session-list"),
    api,
    currentId: sessionId,
    onRenamed: () => showSessionName(),
  });
  const thread = D.createThread({
    root: $("thread"),
    scroller: $("thread-scroll"),
    agentName,
    onRetry: retry,
    onOpenTopic: (id) => openTopic(id),
    onLoadEarlier: () => loadEarlier(),
  });
  const inspector = D.createInspector({
    api,
    sessionId,
    agentName,
    topicForNotes: () => viewedId,
    topicTitle: (id) => topics.title(id),
    onOpenTopic: (id) => openTopic(id),
    // An entry of this session changed in the memory panel: the topic list shows it too.
    onTopicChanged: (payload, fromSession) => {
      if (fromSession !== sessionId) return;
      topics.upsert(payload);
      if (payload.id === viewedId) $("conv-title").textContent = topics.title(payload.id);
    },
  });

  function topicDeleted(id) {
    if (id === viewedId) reloadActive();
    inspector.refresh("memory", "context");
  }

  const messagesUrl = (id) => "/agents-api/topics/" + id + "/messages?limit=" + pageSize;

  function showSessionName() {
    const name = sessions.title(sessionId);
    $("session-name").textContent = name;
    document.title = name + " · " + agentName + " · Driftless";
  }

  // --- viewing topics -------------------------------------------------------------------------
  function previousLink(id) {
    const previous = topics.previousOf(id);
    return previous === null ? null : { id: previous, title: topics.title(previous) };
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
    thread.render(messages, { previous: active && !earlier ? previousLink(id) : null, readOnly: !active, earlier, keepScroll });
    inspector.refresh("notes");
  }

  async function loadEarlier() {
    if (!hasEarlier || !viewedMessages.length) return;
    const id = viewedId;
    try {
      const data = await api.get(messagesUrl(id) + "&before=" + viewedMessages[0].seq);
      if (viewedId !== id) return;
      const older = D.results(data);
      showTopic(id, older.concat(viewedMessages), { earlier: older.length >= pageSize, keepScroll: true });
      D.announce(older.length ? older.length + " earlier messages loaded." : "There are no earlier messages.");
    } catch (err) {
      D.toast("Could not load earlier messages: " + err.message);
    }
  }

  async function openTopic(id) {
    closeDrawers();
    if (id === topics.activeId()) {
      if (viewedId !== id) await reloadActive();
      return;
    }
    try {
      const data = await api.get(messagesUrl(id));
      showTopic(id, D.results(data));
    } catch (err) {
      D.toast("Could not open that topic: " + err.message);
    }
  }

  async function reloadActive() {
    const id = topics.activeId();
    try {
      const data = await api.get(messagesUrl(id));
      showTopic(id, D.results(data));
    } catch (err) {
      D.toast("Could not load the conversation: " + err.message);
    }
  }

  /** After a reconnect: events may have been missed, so read the state again. */
  async function resync() {
    const wasViewingActive = viewedId === topics.activeId();
    try {
      const list = D.results(await api.get("/agents-api/sessions/" + sessionId + "/topics/"));
      list.forEach((topic) => topics.upsert(topic));
      nameFromActiveTopic();
      // A turn still running announces itself again with its next delta.
      setWorking(false);
      await (wasViewingActive ? reloadActive() : openTopic(viewedId));
      // The message given back to the composer had reached the server after all.
      const lastUser = [...viewedMessages].reverse().find((message) => message.role === "user");
      if (restoredDraft !== null && lastUser && lastUser.content === restoredDraft && input.value.trim() === restoredDraft) {
        input.value = "";
        saveDraft();
        autosize();
        D.toast("Your message had arrived before the connection dropped.");
      }
      restoredDraft = null;
      inspector.refresh("memory", "facts", "notes", "context");
      await sessions.refresh();
    } catch (err) {
      D.toast("Could not refresh the conversation: " + err.message);
    }
  }

  /** A session without a title of its own is named after its active topic. */
  function nameFromActiveTopic() {
    const active = topics.get(topics.activeId());
    if (active && active.title) sessions.touch({ shown_title: active.title });
    showSessionName();
  }

  // --- working state --------------------------------------------------------------------------
  function setWorking(state) {
    working = Boolean(state);
    thread.setWorking(viewedId === topics.activeId() ? state : false);
    clearTimeout(watchdog);
    if (working) watchdog = setTimeout(() => setWorking(false), WORKING_WATCHDOG_MS);
    updateComposer();
  }

  function retry() {
    if (!send({ type: "turn.retry" })) return;
    thread.clearFailure();
    setWorking(true);
  }

  // --- events -----------------------------------------------------------------------------
  const handlers = {
    "message.created"({ message }) {
      sessions.touch({ updated_at: new Date().toISOString() });
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
    "turn.started"() {
      thread.clearFailure();
      setWorking(true);
    },
    "reply.delta"({ turn_id: turnId, delta }) {
      if (viewedId === topics.activeId()) thread.delta(turnId, delta);
      if (!working) setWorking(true);
    },
    "turn.done"({ ok }) {
      thread.endStream();
      if (ok) setWorking(false);
      inspector.refresh("context");
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
      nameFromActiveTopic();
      evaluator.reset();
      if (wasViewingActive) {
        const moved = new Set(relocated || []);
        showTopic(
          topic.id,
          viewedMessages.filter((message) => moved.has(message.id)).map((message) => ({ ...message, topic_id: topic.id }))
        );
      }
      D.announce(topic.origin === "drift" ? "The conversation moved to a new topic." : "New topic started.");
      inspector.refresh("memory", "notes", "context");
    },
    "topic.updated"({ topic, reason }) {
      topics.upsert(topic);
      if (topic.id === viewedId) $("conv-title").textContent = topics.title(topic.id);
      if (topic.id === topics.activeId()) nameFromActiveTopic();
      if (reason === "curation" || reason === "summary") inspector.refresh("memory");
    },
    "topic.deleted"({ topic_id: id }) {
      if (!topics.get(id)) return; // this tab deleted it already
      topics.remove(id);
      topicDeleted(id);
    },
    "session.deleted"() {
      D.toast("This session was deleted.");
      setTimeout(() => location.assign("/"), 1500);
    },
    error({ code, message }) {
      const back = thread.takeBackPending();
      if (back !== null && !input.value.trim()) {
        input.value = back;
        saveDraft();
        autosize();
      }
      if (code !== "turn_in_progress") setWorking(false);
      if (code === "events_unavailable") {
        // What was sent is stored; the socket closes and the page re-syncs on reconnect.
        D.toast("Live updates paused: " + message);
        return;
      }
      D.toast(code === "turn_in_progress" ? "Wait for the reply to finish, then send again." : "Not sent: " + message);
    },
  };

  // --- the socket -----------------------------------------------------------------------------
  function setConn(state, text) {
    conn.dataset.state = state;
    conn.textContent = text;
  }

  function connect() {
    clearTimeout(reconnectTimer);
    reconnectTimer = null;
    setConn("connecting", everConnected ? "Reconnecting…" : "Connecting…");
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/sessions/" + sessionId + "/");
    socket = ws;
    ws.addEventListener("open", () => {
      attempts = 0;
      setConn("open", "Connected");
      const again = everConnected;
      everConnected = true;
      updateComposer();
      if (again) resync();
    });
    ws.addEventListener("message", (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch (err) {
        return;
      }
      const handler = handlers[data.type];
      if (handler) handler(data);
    });
    ws.addEventListener("close", (event) => {
      if (socket !== ws) return;
      socket = null;
      // A message not yet acknowledged may not have arrived: give it back to the composer.
      const back = thread.takeBackPending();
      if (back !== null && !input.value.trim()) {
        input.value = back;
        restoredDraft = back;
        saveDraft();
      }
      evaluator.trigger();
      if (NO_RECONNECT_CODES.has(event.code)) {
        setConn("closed", "Disconnected");
        showStatus("This session is not available to you any more. Log in again and reload the page.");
        updateComposer();
        return;
      }
      scheduleReconnect();
    });
  }

  function scheduleReconnect() {
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** attempts) * (0.75 + Math.random() * 0.5);
    attempts += 1;
    setConn("closed", "Offline");
    showStatus("Connection lost. Reconnecting in " + Math.max(1, Math.round(delay / 1000)) + " s; your draft is kept.", true);
    reconnectTimer = setTimeout(connect, delay);
    updateComposer();
  }

  function reconnectNow() {
    if (socket) return;
    connect();
  }

  function send(frame) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      showStatus("Not connected yet; your message is kept and can be sent once the connection is back.", true);
      return false;
    }
    socket.send(JSON.stringify(frame));
    return true;
  }

  function showStatus(text, withButton) {
    statusLine.replaceChildren(document.createTextNode(text));
    if (withButton) {
      statusLine.append(D.el("button", { type: "button", class: "btn btn-small", onclick: reconnectNow }, "Reconnect now"));
    }
    statusLine.hidden = false;
  }

  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") return;
    if (!socket) reconnectNow();
    sessions.refresh().catch(() => {});
  });
  // Shown again from the back-forward cache: that copy is as old as the moment the page was
  // left, so read everything again (and reconnect: the socket was closed on the way out).
  window.addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    if (socket) resync();
    else reconnectNow();
  });

  // --- the composer -----------------------------------------------------------------------------
  function updateComposer() {
    const open = socket !== null && socket.readyState === WebSocket.OPEN;
    if (open) statusLine.hidden = true;
    sendButton.disabled = !input.value.trim() || working || !open;
    sendButton.setAttribute("aria-label", working ? "Send message (wait for the reply)" : "Send message");
  }

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, window.innerHeight * 0.4) + "px";
    updateComposer();
  }

  const saveDraft = () => {
    try {
      if (input.value) localStorage.setItem(draftKey, input.value);
      else localStorage.removeItem(draftKey);
    } catch (err) {
      // Storage may be off (private mode); the draft then lives only in the page.
    }
  };

  async function submit() {
    const content = input.value.trim();
    if (!content) return;
    if (working) {
      D.toast("Wait for the reply to finish, then send again.");
      return;
    }
    if (viewedId !== topics.activeId()) await reloadActive();
    if (!send({ type: "message.send", content })) return;
    thread.addPending(content);
    input.value = "";
    saveDraft();
    autosize();
    evaluator.reset();
    thread.clearFailure();
    setWorking(true);
  }

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => {
    saveDraft();
    autosize();
  });

  $("new-topic").addEventListener("click", () => {
    if (working) {
      D.toast("Wait for the reply to finish before starting a new topic.");
      return;
    }
    if (send({ type: "topic.new" })) input.focus();
  });
  $("back-to-active").addEventListener("click", () => reloadActive());

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
    if (event.key === "Escape") closeDrawers();
  });

  // --- the brain legend: shown until dismissed, then one click away ----------------------------
  const legendKey = "driftless:brain-legend-seen";
  function showLegend(open) {
    $("brain-legend").hidden = !open;
    $("legend-toggle").setAttribute("aria-expanded", String(open));
  }
  $("legend-dismiss").addEventListener("click", () => {
    try {
      localStorage.setItem(legendKey, "1");
    } catch (err) {
      // Without storage the legend simply shows again next time.
    }
    showLegend(false);
    $("legend-toggle").focus();
  });
  $("legend-toggle").addEventListener("click", () => showLegend($("brain-legend").hidden));
  try {
    showLegend(!localStorage.getItem(legendKey));
  } catch (err) {
    showLegend(true);
  }

  // --- start --------------------------------------------------------------------------------------
  topics.load(initial.topics);
  sessions.load(initial.sessions);
  nameFromActiveTopic();
  setInterval(() => sessions.tick(), 60000);
  showTopic(topics.activeId(), initial.messages);
  // A link from search opens the session at a topic: /sessions/<id>/#topic-<topic id>.
  const linked = /^#topic-(\d+)$/.exec(location.hash);
  if (linked && Number(linked[1]) !== topics.activeId()) openTopic(Number(linked[1]));
  try {
    input.value = localStorage.getItem(draftKey) || "";
  } catch (err) {
    input.value = "";
  }
  autosize();
  input.focus();
  connect();
})();
