// Creates a job through tock's REST API with the typed client, reads it
// back, and prints it as JSON (TOCK_SERVER, TOCK_TOKEN).
import { createTockClient } from "../src/api.js";

const api = createTockClient(process.env.TOCK_SERVER ?? "http://127.0.0.1:8080", { apiKey: process.env.TOCK_TOKEN });
const created = await api.POST("/v1/jobs", {
  body: {
    name: "report-from-typescript",
    schedule: { cron: "0 0 2 * * *", timezone: "Europe/Berlin" },
    handler: { type: "custom", name: "reports" },
    labels: { team: "data" },
  },
});
if (!created.data) throw new Error(`create: ${JSON.stringify(created.error)}`);
const got = await api.GET("/v1/jobs/{id}", { params: { path: { id: created.data.id } } });
if (!got.data) throw new Error(`get: ${JSON.stringify(got.error)}`);
const bad = await api.POST("/v1/jobs", { body: { name: "", handler: { type: "custom", name: "x" } } });
console.log(JSON.stringify({ job: got.data, refused: bad.response.status, problem: bad.error }));
