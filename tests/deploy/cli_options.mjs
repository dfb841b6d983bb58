// `--name value` options of the Node scripts under tests/ and bench/, parsed by Node's own
// util.parseArgs: every option takes a value, an unknown option or a missing value is an error
// (exit 2, with parseArgs' message), and the `required` ones must be given.
import { parseArgs } from "node:util";

export function cliOptions(names, required = []) {
  let values;
  try {
    ({ values } = parseArgs({ options: Object.fromEntries(names.map((n) => [n, { type: "string" }])) }));
  } catch (e) {
    console.error(e.message);
    process.exit(2);
  }
  for (const need of required) {
    if (values[need] === undefined) { console.error(`missing --${need}`); process.exit(2); }
  }
  return values;
}
