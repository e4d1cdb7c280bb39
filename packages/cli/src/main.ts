import { createClient, RunService } from "@drover/proto";
import { describeFailure, runCommand, USAGE } from "./commands.js";

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== "--");
  const [command, ...rest] = args;
  if (!command || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 2;
  }
  const flag = (name: string) => {
    const i = rest.indexOf(`--${name}`);
    return i >= 0 ? rest[i + 1] : rest.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  };
  const address = flag("address") ?? process.env.DROVER_ADDRESS ?? "127.0.0.1:50051";
  const token = flag("token") ?? process.env.DROVER_TOKEN;
  const client = createClient(RunService, address, {
    metadata: (): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {}),
  });
  try {
    return await runCommand(
      command,
      rest,
      client,
      {
        out: (t) => process.stdout.write(`${t}\n`),
        err: (t) => process.stderr.write(`${t}\n`),
        isTty: process.stdout.isTTY === true,
        get columns() {
          return process.stdout.columns;
        },
      },
      process.env,
    );
  } catch (err) {
    const { message, code } = describeFailure(err, address);
    process.stderr.write(`drover: ${message}\n`);
    return code;
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then((code) => process.exit(code));
