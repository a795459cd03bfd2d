// The official TypeScript MCP SDK's client driving a memlane MCP server, for the tests
// (tests/node/test_mcp_outputs.py).  The SDK checks each result's structuredContent against
// the tool's outputSchema with ajv — refusals included — and throws when it does not match.
//
//   node client.mjs PLAN.json
//
// PLAN: {"transport": "stdio", "command": ..., "args": [...], "env": {...}}
//    or {"transport": "http", "url": ..., "token": ...}
// plus "calls": [{"tool", "arguments", "meta"?}].  A string argument "$N.field" is the field
// of call N's structuredContent.  Prints one JSON line: the listed tools; per tool, whether
// the SDK's own validator accepts a refusal, a refusal whose error is no string, and one whose
// call_window is no row; and per call, {"isError", "structuredContent", "text"} or
// {"thrown": message}.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));

function transport() {
  if (plan.transport === "stdio") {
    return new StdioClientTransport({
      command: plan.command, args: plan.args, env: plan.env, stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(plan.url), {
    requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
  });
}

function resolve(value, done) {
  if (typeof value === "string") {
    const ref = /^\$(\d+)\.(\w+)$/.exec(value);
    return ref ? (done[Number(ref[1])].structuredContent ?? {})[ref[2]] ?? null : value;
  }
  if (Array.isArray(value)) return value.map((v) => resolve(v, done));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, done)]));
  }
  return value;
}

const client = new Client({ name: "memlane-tests", version: "1" });
await client.connect(transport());
const listed = await client.listTools();
const probes = [{ error: "a refusal" }, { error: 42 }, { error: "x", call_window: { kind: "x" } }];
const validators = Object.fromEntries(listed.tools.map((tool) => {
  const validator = client.getToolOutputValidator(tool.name);
  return [tool.name, validator ? probes.map((probe) => validator(probe).valid) : null];
}));
const done = [];
for (const call of plan.calls) {
  const params = { name: call.tool, arguments: resolve(call.arguments, done) };
  if (call.meta) params._meta = call.meta;
  try {
    const result = await client.callTool(params);
    done.push({
      isError: result.isError ?? false,
      structuredContent: result.structuredContent,
      text: result.content.map((block) => block.text),
    });
  } catch (error) {
    done.push({ thrown: String(error && error.message ? error.message : error) });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ tools: listed.tools, validators, results: done }) + "\n");
