import { ListNotesResponseSchema } from "@drover/proto";
import { type CommandContext, one } from "../command-context.js";
import { table } from "../render.js";

/** `drover notes`: why rows were skipped or failed, grouped by reason, with sample source ids. */
export async function notes({ client, flags, positionals, width, print }: CommandContext): Promise<number> {
  const response = await client.listNotes({
    runId: one(positionals, "run id"),
    kind: (flags.kind as string | undefined) ?? "",
    level: (flags.level as string | undefined) ?? "",
    samples: typeof flags.samples === "string" ? Number(flags.samples) : 0,
  });
  const { groups } = response;
  print(
    groups.length === 0
      ? "no notes: nothing was skipped or failed"
      : table(
          ["count", "level", "kind", "reason", "e.g. source ids"],
          groups.map((g) => [String(g.count), g.level, g.kind, g.reason, g.sampleSubjectIds.join(", ")]),
          { width },
        ),
    ListNotesResponseSchema,
    response,
  );
  return 0;
}
