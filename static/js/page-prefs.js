/*
 * The user's own settings of the chat page, kept on the server (PATCH preferences) so
 * they follow the user from browser to browser: the brain legend's "Got it", the colour
 * theme (system, light, dark). And the keyboard shortcuts, listed in a help dialog.
 */
import { announce, toast } from "./util.js";
import { url } from "./config.js";

const $ = (id) => document.getElementById(id);
const THEMES = ["system", "light", "dark"];
const THEME_WORDS = { system: "as the system", light: "light", dark: "dark" };

function showLegend(open) {
  $("brain-legend").hidden = !open;
  $("legend-toggle").setAttribute("aria-expanded", String(open));
}

function showTheme(theme) {
  document.documentElement.dataset.theme = theme;
  const button = $("theme-toggle");
  button.textContent = "Theme: " + theme;
  button.setAttribute("aria-label", "Theme: " + THEME_WORDS[theme] + " (change)");
}

/** The legend and the theme toggle, from the user's stored preferences. */
export function installPreferences({ api, preferences }) {
  const save = (changes) => api.patch(url("preferences"), changes).catch((err) => toast("Could not save that: " + err.message));
  let theme = THEMES.includes(preferences.theme) ? preferences.theme : "system";
  showLegend(!preferences.brain_legend_seen);
  showTheme(theme);
  $("legend-dismiss").addEventListener("click", () => {
    showLegend(false);
    $("legend-toggle").focus();
    save({ brain_legend_seen: true });
  });
  $("legend-toggle").addEventListener("click", () => showLegend($("brain-legend").hidden));
  $("theme-toggle").addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    showTheme(theme);
    announce("Theme: " + THEME_WORDS[theme] + ".");
    save({ theme });
  });
}

/** Alt+Shift+N new topic, Alt+Shift+S search, Shift+Esc the message box, Alt+Shift+C copy
 * the last reply, Ctrl+/ the list of them. `copyLastReply` answers whether it copied. */
export function installShortcuts({ newTopic, copyLastReply }) {
  const dialog = $("shortcuts");
  $("shortcuts-open").addEventListener("click", () => dialog.showModal());
  const actions = {
    n: () => newTopic(),
    s: () => $("topbar-q")?.focus(),
    c: async () => announce((await copyLastReply()) ? "Copied the last reply." : "There is no reply to copy."),
  };
  document.addEventListener("keydown", (event) => {
    const letter = (event.code || "").replace(/^Key/, "").toLowerCase();
    if (event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && actions[letter]) {
      event.preventDefault();
      actions[letter]();
    } else if (event.key === "Escape" && event.shiftKey) {
      event.preventDefault();
      $("composer-input").focus();
    } else if ((event.ctrlKey || event.metaKey) && event.key === "/") {
      event.preventDefault();
      if (dialog.open) dialog.close();
      else dialog.showModal();
    }
  });
}
