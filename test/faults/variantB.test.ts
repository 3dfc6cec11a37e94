import { describeFaultSuite } from "./support/faultSuite.ts";

describeFaultSuite("B");
