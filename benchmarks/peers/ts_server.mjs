// The TypeScript SDK peer on Node: one synchronous tool, `greet`, over Streamable HTTP at
// http://127.0.0.1:PORT/mcp (loopback only), answering plain JSON and keeping no session.
// The SDK comes from tests/interop/npm/node_modules (`tests/interop/npm/install` puts it there).
//
//   node ts_server.mjs v1 PORT   # @modelcontextprotocol/sdk 1.x (pinned in package.json):
//                                # the 2025-11-25 wire, `sessionIdGenerator: undefined`,
//                                # `enableJsonResponse`; a fresh McpServer and transport per
//                                # POST, as the SDK requires of a stateless transport
//   node ts_server.mjs v2 PORT   # @modelcontextprotocol/server 2.x: `createMcpHandler` with
//                                # `responseMode: 'json'`, the 2026-07-28 wire (and the 2025
//                                # one through its stateless fallback), behind node:http by
//                                # @hono/node-server, the bridge the v1 SDK itself uses
//
// PORT 0 picks a free port; either way the port is printed first as `PORT n`.

import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [, , line = 'v1', portText = '0'] = process.argv;
const npmDir = fileURLToPath(new URL('../../tests/interop/npm/', import.meta.url));
const require = createRequire(npmDir + 'package.json');

function load(name) {
    try {
        return require(name);
    } catch (error) {
        process.stderr.write(
            `ts_server: cannot load ${name} from ${npmDir}node_modules ` +
                `(run tests/interop/npm/install): ${error.message}\n`
        );
        process.exit(2);
    }
}

const greeting = async ({ name }) => ({ content: [{ type: 'text', text: `Hello, ${name}!` }] });

function v1Listener() {
    const { McpServer } = load('@modelcontextprotocol/sdk/server/mcp.js');
    const { StreamableHTTPServerTransport } = load('@modelcontextprotocol/sdk/server/streamableHttp.js');
    const { z } = load('zod');
    const inputSchema = { name: z.string() };
    return async (req, res) => {
        if (req.method !== 'POST' || !req.url.startsWith('/mcp')) {
            res.writeHead(405).end();
            return;
        }
        const server = new McpServer({ name: 'peer-ts-v1', version: '1' });
        server.registerTool('greet', { inputSchema }, greeting);
        const transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: undefined,
            enableJsonResponse: true
        });
        res.on('close', () => {
            transport.close();
            server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res);
    };
}

function v2Listener() {
    const { McpServer, createMcpHandler } = load('@modelcontextprotocol/server');
    const { getRequestListener } = load('@hono/node-server');
    const { z } = load('zod');
    const inputSchema = z.object({ name: z.string() });
    const handler = createMcpHandler(
        () => {
            const server = new McpServer({ name: 'peer-ts-v2', version: '2' });
            server.registerTool('greet', { inputSchema }, greeting);
            return server;
        },
        { responseMode: 'json' }
    );
    return getRequestListener(request =>
        new URL(request.url).pathname === '/mcp' ? handler.fetch(request) : new Response(null, { status: 404 })
    );
}

const listeners = { v1: v1Listener, v2: v2Listener };
if (!(line in listeners)) {
    process.stderr.write(`usage: node ts_server.mjs {v1|v2} PORT\n`);
    process.exit(2);
}
const httpServer = createServer({ keepAliveTimeout: 60_000 }, listeners[line]());
httpServer.listen(Number(portText), '127.0.0.1', () => {
    process.stdout.write(`PORT ${httpServer.address().port}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
