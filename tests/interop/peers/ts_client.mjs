// The TypeScript SDK's client (@modelcontextprotocol/client, pinned in tests/interop/npm)
// against a server of ours over stdio, with its default settings: no `versionNegotiation`, so
// it opens with the 2025 sequence (`initialize` for 2025-11-25), and the process it spawns
// becomes a legacy session.
//
//     node ts_client.mjs CMD ARG...    # spawns CMD with the SDK's StdioClientTransport
//     node ts_client.mjs --url URL     # Streamable HTTP (the 2025-11-25 transport: a session)
//
// Each step prints one JSON line, as tests/interop/peers/_lines.py says: {"step", "ok",
// "value"} or {"step", "ok": false, "error": {"type", "message", "code", "data"}}. A failing
// step never stops the next one. The steps' names and values are those of sdk_client.py
// where they overlap, so the pytest side compares them with the same expectations.

import { createRequire } from 'node:module';

// The SDK lives in tests/interop/npm/node_modules (tests/interop/npm/install), not next to this
// script: resolve it from there.
const require = createRequire(new URL('../npm/package.json', import.meta.url));
const { Client, ProtocolError, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const ANSWERS = { name: 'Ada', color: 'blue', context: 'interop', ok: true };
// What the user types, by the elicited field's name (sdk_client.py's ANSWERS).

const STEP_MS = 20000; // no step of a loopback server takes a tenth of this

function emit(fields) {
    process.stdout.write(JSON.stringify(fields) + '\n');
}

function describe(error) {
    const found = {
        type: error?.constructor?.name ?? typeof error,
        message: String(error?.message ?? error)
    };
    if (error instanceof ProtocolError) {
        Object.assign(found, { code: error.code, data: error.data ?? null });
    }
    return found;
}

async function step(name, run) {
    try {
        emit({ step: name, ok: true, value: await run() });
    } catch (error) {
        emit({ step: name, ok: false, error: describe(error) });
    }
}

function texts(blocks) {
    return blocks.filter(block => typeof block.text === 'string').map(block => block.text);
}

function readContents(contents) {
    return {
        uri: contents.uri,
        mime_type: contents.mimeType ?? null,
        text: contents.text ?? null,
        blob: contents.blob !== undefined
    };
}

function openClient() {
    const client = new Client(
        { name: 'ts-interop', version: '1.0.0' },
        { capabilities: { elicitation: {} } } // else it refuses our elicitation/create
    );
    client.setRequestHandler('elicitation/create', async request => {
        const properties = request.params.requestedSchema?.properties ?? {};
        const content = Object.fromEntries(
            Object.keys(properties).filter(key => key in ANSWERS).map(key => [key, ANSWERS[key]])
        );
        return { action: 'accept', content };
    });
    return client;
}

async function runSteps(client) {
    const options = { timeout: STEP_MS };
    const call = async (name, args = {}, extra = {}) => {
        const result = await client.callTool({ name, arguments: args }, { ...options, ...extra });
        return { is_error: Boolean(result.isError), text: texts(result.content) };
    };
    const prompt = async (name, args) => {
        const result = await client.getPrompt({ name, arguments: args }, options);
        return result.messages.map(message => message.content.text ?? message.content.type);
    };
    const read = async uri => {
        const result = await client.readResource({ uri }, options);
        return result.contents.map(readContents);
    };
    const names = (items, key = 'name') => items.map(item => item[key]).sort();

    await step('connect', async () => ({
        protocol_version: client.getNegotiatedProtocolVersion() ?? null,
        server: client.getServerVersion()?.name ?? null
    }));
    await step('tools', async () => names((await client.listTools(undefined, options)).tools));
    await step('greet', () => call('greet', { name: 'Ada' }));
    await step('tool_error', () => call('test_error_handling'));
    await step('task_optional_in_place', () => call('slow_compute', { seconds: 0.1 }));
    await step('input_round', () => call('test_input_required_result_elicitation'));
    await step('input_rounds_two', () => call('test_input_required_result_multi_round'));
    await step('prompts', async () => {
        return names((await client.listPrompts(undefined, options)).prompts);
    });
    await step('prompt', () => prompt('test_prompt_with_arguments', { arg1: 'a', arg2: 'b' }));
    await step('prompt_input_round', () => prompt('test_input_required_result_prompt'));
    await step('resources', async () => ({
        resources: names((await client.listResources(undefined, options)).resources, 'uri'),
        templates: names(
            (await client.listResourceTemplates(undefined, options)).resourceTemplates,
            'uriTemplate'
        )
    }));
    await step('read_text', () => read('test://static-text'));
    await step('read_binary', () => read('test://static-binary'));
    await step('read_template', () => read('test://template/42/data'));
    await step('complete', async () => {
        const ref = { type: 'ref/prompt', name: 'test_prompt_with_arguments' };
        const argument = { name: 'arg1', value: 'par' };
        const result = await client.complete({ ref, argument }, options);
        return result.completion.values;
    });
    await step('progress', async () => {
        const seen = [];
        const onprogress = ({ progress, total, message }) => {
            seen.push([progress, total ?? null, message ?? null]);
        };
        const { text } = await call('test_tool_with_progress', {}, { onprogress });
        return { text, progress: seen };
    });
}

async function main([command, ...args]) {
    const client = openClient();
    const transport =
        command === '--url'
            ? new StreamableHTTPClientTransport(new URL(args[0]))
            : new StdioClientTransport({ command, args, stderr: 'inherit' });
    let connected = false;
    await step('initialize', async () => {
        await client.connect(transport, { timeout: STEP_MS });
        connected = true;
        return { connected: client.getNegotiatedProtocolVersion() ?? null };
    });
    try {
        if (connected) await runSteps(client);
    } finally {
        await client.close();
    }
}

await main(process.argv.slice(2));
