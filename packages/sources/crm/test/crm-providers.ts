import type { Provider } from "@drover/provider-sdk";
import { crmProvider } from "../src/provider.js";

/** The engine's registry as these tests need it: the crm source alone, by its name. */
export const crmProviders: ReadonlyMap<string, Provider> = new Map([[crmProvider.name, crmProvider]]);
