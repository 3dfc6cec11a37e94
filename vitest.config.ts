import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/support/globalSetup.ts"],
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          // The fault suite (RELIABILITY.md): its own chain, PostgreSQL and Ponder per variant;
          // FAULTS=long for the long form.
          name: "faults",
          include: ["test/faults/**/*.test.ts"],
          testTimeout: process.env.FAULTS === "long" ? 3_600_000 : 600_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
