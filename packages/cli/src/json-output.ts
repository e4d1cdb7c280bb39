import { type DescMessage, type MessageShape, toJsonString } from "@drover/proto";

/**
 * A response as `--json` prints it: the message's canonical protobuf JSON (int64 as strings,
 * timestamps in RFC 3339, enums by name), the same mapping every protobuf runtime reads back, with
 * fields at their default value included so a script finds `"failed": "0"` rather than no key.
 */
export function responseJson<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  options: { compact?: boolean } = {},
): string {
  return toJsonString(schema, message, {
    alwaysEmitImplicit: true,
    prettySpaces: options.compact ? 0 : 2,
  });
}
