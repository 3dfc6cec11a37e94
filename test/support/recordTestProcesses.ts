import { recordProcessesIn } from "../../scripts/devnet/processRecords.ts";
import { TEST_PROCESS_FOLDER } from "./testProcesses.ts";

// A setup file: runs in each test file's worker before the file, so every Anvil, Ponder,
// PostgreSQL, Dovecot, service and CLI process the file starts is recorded.
recordProcessesIn(TEST_PROCESS_FOLDER);
