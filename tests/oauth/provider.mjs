// A real OAuth 2.1 authorization server for tests/oauth: oidc-provider (pinned in
// tests/interop/npm), on 127.0.0.1.
//
//     node provider.mjs PORT RESOURCE CLIENT_SECRET [OPTIONS]   # PORT 0: one the system picks
//
// It issues JWT access tokens (ES256, a key made at start) whose `aud` is RESOURCE, the only
// resource indicator it accepts; it registers clients dynamically (RFC 7591), logs users in
// with its test-only login and consent pages (devInteractions), demands PKCE of every client,
// and knows one static client, `svc` with CLIENT_SECRET, for the client_credentials grant.
//
// OPTIONS, a JSON object (tests/auth), changes that; every key may be left out:
//   "resources":    more resource indicators it issues tokens for (another server's)
//   "ttl":          the access tokens' lifetime in seconds (600)
//   "kid":          the signing key's kid ("test-es256")
//   "signingKey":   the private EC P-256 JWK to sign with (else one made at start)
//   "opaque":       true: opaque access tokens, checked by introspection (RFC 7662), and
//                   revocable (RFC 7009)
//   "introspector": [client_id, client_secret] of a confidential client that may introspect
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

const [port, resource, clientSecret, optionsJson] = process.argv.slice(2);
if (port === undefined || !resource || !clientSecret) {
    process.stderr.write('usage: node provider.mjs PORT RESOURCE CLIENT_SECRET [OPTIONS]\n');
    process.exit(2);
}
const options = optionsJson ? JSON.parse(optionsJson) : {};
const resources = new Set([resource, ...(options.resources ?? [])]);

function emit(fields) {
    process.stdout.write(JSON.stringify(fields) + '\n');
}

const privateJwk = options.signingKey
    ?? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
const { kty, crv, x, y, d } = privateJwk;
const signingKey = { kty, crv, x, y, d, kid: options.kid ?? 'test-es256', alg: 'ES256', use: 'sig' };

const configuration = {
    jwks: { keys: [signingKey] },
    clientDefaults: { id_token_signed_response_alg: 'ES256' }, // (the default, RS256, has no key)
    clients: [{
        client_id: 'svc',
        client_secret: clientSecret,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
    }, ...(options.introspector ? [{
        client_id: options.introspector[0],
        client_secret: options.introspector[1],
        grant_types: [],
        redirect_uris: [],
        response_types: [],
    }] : [])],
    pkce: { required: () => true },
    features: {
        devInteractions: { enabled: true },
        registration: { enabled: true },
        clientCredentials: { enabled: true },
        ...(options.opaque ? {
            introspection: { enabled: true, allowedPolicy: async (ctx, client) => client.clientAuthMethod !== 'none' },
            revocation: { enabled: true, allowedPolicy: async (ctx, client, token) => token.clientId === client.clientId },
        } : {}),
        resourceIndicators: {
            enabled: true,
            defaultResource: () => undefined,
            useGrantedResource: async () => true,
            getResourceServerInfo: async (ctx, indicator) => {
                if (!resources.has(indicator)) {
                    throw new errors.InvalidTarget();
                }
                if (options.opaque) {
                    return { scope: 'mcp:read mcp:write', accessTokenFormat: 'opaque', accessTokenTTL: options.ttl ?? 600 };
                }
                return {
                    scope: 'mcp:read mcp:write',
                    accessTokenFormat: 'jwt',
                    accessTokenTTL: options.ttl ?? 600,
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
