// A remote control for the official TypeScript MCP SDK: it connects to the
// MCP server named by its arguments over stdio, then reads one request per
// line on stdin and answers each with one JSON line on stdout. The Go test
// TestTypeScriptSDKSession drives the same session through it as through the
// Go SDK, so the checks live in one place.
//
//   {"op": "list"}                                    -> {"tools": [...]}
//   {"op": "call", "tool", "args", "progress": bool, "timeout": ms}
//                                                     -> {"text", "isError", "progress": [...]}
//   {"op": "close"}                                   -> {"closed": true}
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "agentproc-ts-test", version: "1.0.0" });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

await client.connect(transport);
out({ ready: true, server: client.getServerVersion(), instructions: client.getInstructions() });

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const req = JSON.parse(line);
  try {
    if (req.op === "list") {
      const r = await client.listTools();
      out({ tools: r.tools });
    } else if (req.op === "close") {
      await client.close();
      out({ closed: true });
      break;
    } else {
      const progress = [];
      const opts = { timeout: req.timeout ?? 60000 };
      if (req.progress) {
        opts.onprogress = (p) => progress.push(p.message ?? "");
        opts.resetTimeoutOnProgress = true;
      }
      const r = await client.callTool({ name: req.tool, arguments: req.args }, undefined, opts);
      out({ text: r.content.map((c) => c.text ?? "").join(""), isError: !!r.isError, progress });
    }
  } catch (e) {
    out({ error: String(e) });
  }
}
process.exit(0);
