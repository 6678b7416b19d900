/*
 * The session's websocket (docs/websocket.md): connects, reconnects by itself with
 * exponential backoff and jitter, and hands each event to the page. The close codes that
 * mean "not yours any more" (4401, 4403) end it for good.
 */

const RECONNECT_BASE_MS = 500;
const RECONNECT_MAX_MS = 15000;
const NO_RECONNECT_CODES = new Set([4401, 4403]);

/**
 * onState(state, detail): "connecting" | "open" | "closed" (detail: {retryInMs}) | "ended".
 * onOpen(again): connected; `again` after a reconnect (events may have been missed).
 * onClose(): the socket closed (before any reconnect is scheduled).
 */
export function createSocket({ path, onEvent, onOpen, onClose, onState }) {
  let socket = null;
  let everConnected = false;
  let attempts = 0;
  let timer = null;
  let ended = false;

  function connect() {
    if (ended) return;
    clearTimeout(timer);
    timer = null;
    onState("connecting", { again: everConnected });
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + path);
    socket = ws;
    ws.addEventListener("open", () => {
      attempts = 0;
      const again = everConnected;
      everConnected = true;
      onState("open", {});
      onOpen(again);
    });
    ws.addEventListener("message", (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch (err) {
        return;
      }
      if (data && typeof data.type === "string") onEvent(data);
    });
    ws.addEventListener("close", (event) => {
      if (socket !== ws) return;
      socket = null;
      onClose();
      if (NO_RECONNECT_CODES.has(event.code)) {
        ended = true;
        onState("ended", {});
        return;
      }
      const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** attempts) * (0.75 + Math.random() * 0.5);
      attempts += 1;
      timer = setTimeout(connect, delay);
      onState("closed", { retryInMs: delay });
    });
  }

  return {
    connect,
    /** Try now (the network is back, the tab is visible again, the user asked). */
    reconnectNow() {
      if (!socket && !ended) connect();
    },
    isOpen: () => socket !== null && socket.readyState === WebSocket.OPEN,
    get connected() {
      return socket !== null;
    },
    /** Send one frame; false (nothing sent) while not connected. */
    send(frame) {
      if (!socket || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(frame));
      return true;
    },
  };
}
