import { droverVitestConfig } from "../../../vitest.shared.ts";

export default droverVitestConfig("@drover/source-hubspot");
