#!/usr/bin/env node
// The `pay-and-earn` bin: a plain-JavaScript shim, so that an old Node gets a clear line
// instead of a syntax error, and Node 24 then runs the TypeScript CLI directly (type stripping).
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `pay-and-earn: needs Node 22.18 or newer (this is ${process.versions.node}); run it with npx pay-and-earn in the repository, which uses the Node 24 it installs\n`,
  );
  process.exit(2);
}
await import("./main.ts");
