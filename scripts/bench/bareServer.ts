import type { AddressInfo } from "node:net";
import express from "express";

/**
 * The baseline every route is compared with: bare Express answering JSON, in a process of its
 * own like the service. GET /bare answers a small object; POST /bare parses a JSON body first
 * (the service parses every POST too). Prints `listening <url>` once ready.
 */
const app = express();
app.disable("x-powered-by");
app.use(express.json({ limit: "16kb" }));
app.get("/bare", (_request, response) => {
  response.json({ ok: true });
});
app.post("/bare", (request, response) => {
  response.json({ ok: true, fields: Object.keys(request.body ?? {}).length });
});
const server = app.listen(0, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
