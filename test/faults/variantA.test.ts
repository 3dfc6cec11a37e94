import { describeFaultSuite } from "../support/faults/faultSuite.ts";

describeFaultSuite("A");
