// The API client: typed by src/api.gen.ts (generated from api/openapi.yaml
// by `make generate`), authenticated with the key or token the user signed
// in with, which lives in sessionStorage only: it is gone when the tab is.
import createClient, { type Middleware } from "openapi-fetch";
import { signal } from "@preact/signals";
import type { components, paths } from "./api.gen";

export type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type Execution = Schemas["Execution"];
export type Problem = Schemas["Problem"];
export type Whoami = Schemas["Whoami"];

const keyName = "tock.key";

export function storedKey(): string {
  return sessionStorage.getItem(keyName) ?? "";
}

export function setKey(key: string) {
  if (key) sessionStorage.setItem(keyName, key);
  else sessionStorage.removeItem(keyName);
}

/** Set when the server answers 401: the app shows the sign-in page. */
export const signInNeeded = signal(false);

const auth: Middleware = {
  onRequest({ request }) {
    const key = storedKey();
    if (key) request.headers.set("Authorization", "Bearer " + key);
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401) signInNeeded.value = true;
    return response;
  },
};

export const api = createClient<paths>({ baseUrl: location.origin });
api.use(auth);

/** authHeaders are the headers of a request made without the client (the change stream). */
export function authHeaders(): Record<string, string> {
  const key = storedKey();
  return key ? { Authorization: "Bearer " + key } : {};
}

/** ApiError is a refused or failed call, with the server's problem+json. */
export class ApiError extends Error {
  constructor(public status: number, public problem: Problem) {
    super(problem.detail || problem.title);
  }
  /** fieldErrors maps each field the server named to its message. */
  fieldErrors(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const e of this.problem.errors ?? []) out[e.field] = e.message;
    return out;
  }
}

/**
 * must unwraps an openapi-fetch result: the data, or an ApiError to throw.
 * A network failure becomes a 0-status problem.
 */
export async function must<T>(
  p: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let r;
  try {
    r = await p;
  } catch (e) {
    throw new ApiError(0, { type: "about:blank", title: "tock is unreachable", status: 0, detail: String(e) });
  }
  if (r.response.ok) return r.data as T;
  const body = r.error as Partial<Problem> | undefined;
  throw new ApiError(r.response.status, {
    type: body?.type ?? "about:blank",
    title: body?.title ?? r.response.statusText,
    status: r.response.status,
    detail: body?.detail,
    errors: body?.errors,
  });
}

/** The caller: who signed in and what they may do (GET /v1/whoami). */
export const me = signal<Whoami | null>(null);

/** can says whether the caller may take action in namespace ns ("" = anywhere). */
export function can(action: string, ns = ""): boolean {
  const w = me.value;
  if (!w) return false;
  const where = w.actions[action] ?? [];
  return where.includes("*") || (ns === "" ? where.length > 0 : where.includes(ns));
}

/** myNamespaces are the namespaces where the caller has a role, or ["*"] for every one. */
export function myNamespaces(): string[] {
  const w = me.value;
  if (!w) return [];
  if (w.open || w.grants.some((g) => g.namespace === "*")) return ["*"];
  return [...new Set(w.grants.map((g) => g.namespace))].sort();
}
