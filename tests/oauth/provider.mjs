// A real OAuth 2.1 authorization server for tests/oauth: oidc-provider (pinned in
// tests/interop/npm), on 127.0.0.1.
//
//     node provider.mjs PORT RESOURCE CLIENT_SECRET   # PORT 0: one the system picks
//
// It issues JWT access tokens (ES256, a key made at start) whose `aud` is RESOURCE, the only
// resource indicator it accepts; it registers clients dynamically (RFC 7591), logs users in
// with its test-only login and consent pages (devInteractions), demands PKCE of every client,
// and knows one static client, `svc` with CLIENT_SECRET, for the client_credentials grant.
//
// Once it listens it prints {"ready": ISSUER}; then {"request": "METHOD PATH"} as each request
// arrives (before it is answered), so a test can count what reached it.

import { createRequire } from 'node:module';
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

// oidc-provider lives in tests/interop/npm/node_modules, not next to this script.
const require = createRequire(new URL('../interop/npm/package.json', import.meta.url));
const { Provider, errors } = await import(pathToFileURL(require.resolve('oidc-provider')).href);

const [port, resource, clientSecret] = process.argv.slice(2);
if (port === undefined || !resource || !clientSecret) {
    process.stderr.write('usage: node provider.mjs PORT RESOURCE CLIENT_SECRET\n');
    process.exit(2);
}

function emit(fields) {
    process.stdout.write(JSON.stringify(fields) + '\n');
}

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-es256', alg: 'ES256', use: 'sig' };

const configuration = {
    jwks: { keys: [signingKey] },
    clientDefaults: { id_token_signed_response_alg: 'ES256' }, // (the default, RS256, has no key)
    clients: [{
        client_id: 'svc',
        client_secret: clientSecret,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
    }],
    pkce: { required: () => true },
    features: {
        devInteractions: { enabled: true },
        registration: { enabled: true },
        clientCredentials: { enabled: true },
        resourceIndicators: {
            enabled: true,
            defaultResource: () => undefined,
            useGrantedResource: async () => true,
            getResourceServerInfo: async (ctx, indicator) => {
                if (indicator !== resource) {
                    throw new errors.InvalidTarget();
                }
                return {
                    scope: 'mcp:read mcp:write',
                    accessTokenFormat: 'jwt',
                    accessTokenTTL: 600,
                    jwt: { sign: { alg: 'ES256' } },
                };
            },
        },
    },
    findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
};

const server = createServer();
server.listen(Number(port), '127.0.0.1', () => {
    const issuer = `http://127.0.0.1:${server.address().port}`;
    const provider = new Provider(issuer, configuration);
    const answer = provider.callback();
    server.on('request', (request, response) => {
        emit({ request: `${request.method} ${request.url.split('?')[0]}` });
        answer(request, response);
    });
    emit({ ready: issuer });
});

for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => process.exit(0));
}
