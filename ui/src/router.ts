// Routing under /ui/: the path names the page, the query string holds its
// filters, so a view can be bookmarked and shared. tockd answers every
// /ui/ path with the app (index.html).
import { signal } from "@preact/signals";

export const base = "/ui";

/** route is the current location below /ui: path and query. */
export const route = signal(current());

function current() {
  const path = location.pathname.startsWith(base) ? location.pathname.slice(base.length) || "/" : "/";
  return { path, query: new URLSearchParams(location.search) };
}

addEventListener("popstate", () => (route.value = current()));

/** go shows the page at to (a path below /ui, with its query). */
export function go(to: string, replace = false) {
  const url = base + to;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route.value = current();
  if (!replace) scrollTo(0, 0);
}

/** setQuery replaces the current page's filters in the URL. */
export function setQuery(q: Record<string, string | undefined>) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v) params.set(k, v);
  const s = params.toString();
  go(route.value.path + (s ? "?" + s : ""), true);
}

/** onLink makes a plain <a href> navigate within the app. */
export function onLink(e: MouseEvent) {
  const a = (e.target as HTMLElement).closest("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target) return;
  const href = a.getAttribute("href") ?? "";
  if (!href.startsWith(base + "/") && href !== base) return;
  e.preventDefault();
  go(href.slice(base.length) || "/");
}

/** href is the link to a page below /ui. */
export const href = (to: string) => base + to;
