import { VerifyRunResponseSchema } from "@drover/proto";
import { type CommandContext, one } from "../command-context.js";
import { verificationTable } from "../render.js";

/** `drover verify`: verifies the run against its source; exits 1 if the verification did not pass. */
export async function verify({ client, positionals, width, print }: CommandContext): Promise<number> {
  const response = await client.verifyRun({ runId: one(positionals, "run id") });
  const v = response.verification;
  print(
    v
      ? [
          v.ok
            ? "verification passed"
            : v.error
              ? `verification could not finish: ${v.error}`
              : "verification found problems",
          verificationTable(v, "ledger", { width }),
        ].join("\n")
      : "no verification result",
    VerifyRunResponseSchema,
    response,
  );
  return v && !v.ok ? 1 : 0;
}
