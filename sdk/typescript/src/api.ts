// The REST API for TypeScript users: a typed client on openapi-fetch,
// with the types generated from tock's OpenAPI document (api.gen.ts,
// written by `npm run build`, not committed; the same the dashboard uses).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./api.gen.js";

export type { components, paths };
/** The API's schemas: Job, Execution, JobCreate, … */
export type Schemas = components["schemas"];

/** A client of tock's REST API at baseUrl (e.g. http://127.0.0.1:8080), with an API key if given. */
export function createTockClient(baseUrl: string, opts: { apiKey?: string } = {}): Client<paths> {
  return createClient<paths>({
    baseUrl,
    headers: opts.apiKey ? { Authorization: `Bearer ${opts.apiKey}` } : undefined,
  });
}
