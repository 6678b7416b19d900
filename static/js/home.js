/* The home page: the sessions list, live (rename; read again when the tab returns). */
import { createApi } from "./util.js";
import { startSessionsPage } from "./sessions.js";

const list = document.getElementById("session-list");
if (list) startSessionsPage({ list, api: createApi() });
