//! The API's OpenAPI 3.1 document, served at `/openapi.json`.

use serde_json::{Value, json};

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn error_ref() -> Value {
    json!({"$ref": "#/components/responses/Error"})
}

/// What a new session leads to: every operation on it (for clients and for stateful testing).
fn session_links() -> Value {
    let on_session =
        |op: &str| json!({"operationId": op, "parameters": {"sid": "$response.body#/session"}});
    let on_file = |op: &str| json!({"operationId": op, "parameters": {"sid": "$response.body#/session", "path": "$response.body#/path"}});
    json!({
        "ReadFunctionFile": on_file("readFile"),
        "WriteFunctionFile": on_file("writeFile"),
        "Exec": on_session("exec"),
        "Test": on_session("test"),
        "Submit": on_session("submit"),
        "Close": on_session("closeSession")
    })
}

fn sid() -> Value {
    json!({"name": "sid", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}})
}

/// At most this many instance ids are listed in the document (as the `enum` of the instance a
/// session opens); a larger dataset's are left to `GET /v1/instances`.
const LISTED_INSTANCES: usize = 1000;

/// The document of a server over these instances.
pub fn document(instances: &[&str]) -> Value {
    let instance = if instances.len() <= LISTED_INSTANCES {
        json!({"type": "string", "enum": instances, "description": "an instance's id (`GET /v1/instances`)"})
    } else {
        json!({"type": "string", "description": "an instance's id (`GET /v1/instances`)"})
    };
    let errors = |codes: &[&str]| -> Value {
        let mut m = serde_json::Map::new();
        for c in codes {
            m.insert((*c).to_owned(), error_ref());
        }
        Value::Object(m)
    };
    let with = |mut base: Value, extra: Value| {
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        base
    };
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "r2e serve",
            "version": "1",
            "description": "A built r2e dataset as an environment for programming agents: open a session on an instance, read and edit its repository, run commands in the sandbox, run the tests and submit for a reward. Every route needs `Authorization: Bearer TOKEN` when the server was started with `--token-env`. Errors are `{\"error\": message}`."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {
                "Error": ok("An error", json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}))
            },
            "schemas": {
                "Test": {
                    "type": "object",
                    "required": ["name", "outcome"],
                    "properties": {
                        "name": {"type": "string"},
                        "outcome": {"enum": ["pass", "fail"]},
                        "message": {"type": ["string", "null"]},
                        "inputs": strings,
                        "expected": strings,
                        "actual": strings
                    }
                }
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/instances": {"get": {
                "operationId": "listInstances",
                "summary": "List the instances",
                "responses": with(json!({"200": ok("The instances", json!({"type": "object", "required": ["instances"], "properties": {"instances": {"type": "array", "items": {"type": "object", "required": ["id", "repo", "path", "qualname", "spec", "problem", "tests"], "properties": {
                    "id": {"type": "string"}, "repo": {"type": "string"}, "path": {"type": "string"},
                    "qualname": {"type": "string"}, "spec": {"type": ["string", "null"]},
                    "problem": {"type": "string"}, "tests": {"type": "integer"}
                }}}}}))}), errors(&["401"]))
            }},
            "/v1/sessions": {
                "post": {
                    "operationId": "openSession",
                    "summary": "Open a session on an instance",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["instance"], "additionalProperties": false, "properties": {"instance": instance}}}}},
                    "responses": with(json!({"201": with(ok("The session", json!({"type": "object", "required": ["session", "instance", "path", "qualname"], "properties": {
                        "session": {"type": "string"}, "instance": {"type": "string"},
                        "path": {"type": "string", "description": "the file of the function, relative to the workspace"},
                        "qualname": {"type": "string"}
                    }})), json!({"links": session_links()}))}), errors(&["400", "401", "404", "409", "429"]))
                },
                "get": {
                    "operationId": "listSessions",
                    "summary": "List the open sessions",
                    "responses": with(json!({"200": ok("The open sessions", json!({"type": "object", "required": ["sessions"], "properties": {"sessions": {"type": "array", "items": {"type": "object", "properties": {
                        "session": {"type": "string"}, "instance": {"type": "string"}, "idle_seconds": {"type": "number"}
                    }}}}}))}), errors(&["401"]))
                }
            },
            "/v1/sessions/{sid}": {"delete": {
                "operationId": "closeSession",
                "summary": "Close a session (its workspace is removed)",
                "parameters": [sid()],
                "responses": with(json!({"200": ok("Closed", json!({"type": "object"}))}), errors(&["401", "404"]))
            }},
            "/v1/sessions/{sid}/files/{path}": {
                "parameters": [sid(), {"name": "path", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}, "description": "relative to the workspace; no `..`, no absolute path, no symbolic link on the way"}],
                "get": {
                    "operationId": "readFile",
                    "summary": "Read a file of the workspace",
                    "responses": with(json!({"200": {"description": "The file's text", "content": {"text/plain": {"schema": {"type": "string"}}}}}), errors(&["400", "401", "404", "413"]))
                },
                "put": {
                    "operationId": "writeFile",
                    "summary": "Write a file of the workspace (the body is its new text)",
                    "requestBody": {"required": true, "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "responses": with(json!({"200": ok("Written", json!({"type": "object", "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}}}))}), errors(&["400", "401", "404", "413"]))
                }
            },
            "/v1/sessions/{sid}/exec": {"post": {
                "operationId": "exec",
                "summary": "Run `sh -c command` in the workspace, in the sandbox (no network; the workspace is the only writable folder). A command that writes past the session's quota is stopped, what it added is taken back, and the answer is 413",
                "parameters": [sid()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["command"], "additionalProperties": false, "properties": {"command": {"type": "string"}, "timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 10}}}}}},
                "responses": with(json!({"200": ok("What the command did", json!({"type": "object", "required": ["stdout", "stderr", "exit_code", "timed_out"], "properties": {
                    "stdout": {"type": "string"}, "stderr": {"type": "string"},
                    "exit_code": {"type": ["integer", "null"]}, "timed_out": {"type": "boolean"},
                    "signal": {"type": "integer"}, "limit": {"type": "string"}
                }}))}), errors(&["400", "401", "404", "413", "500"]))
            }},
            "/v1/sessions/{sid}/test": {"post": {
                "operationId": "test",
                "summary": "Run the instance's tests (those not held out) against the workspace's function",
                "parameters": [sid()],
                "responses": with(json!({"200": ok("The visible tests' outcomes", json!({"type": "object", "required": ["outcome", "passed", "total", "tests"], "properties": {
                    "outcome": {"enum": ["pass", "fail", "error"], "description": "`error`: the check could not judge the function (not its doing); retry"},
                    "passed": {"type": "integer"}, "total": {"type": "integer"},
                    "error": {"type": ["string", "null"]},
                    "failure_class": {"type": ["string", "null"]},
                    "tests": {"type": "array", "items": {"$ref": "#/components/schemas/Test"}}
                }}))}), errors(&["401", "404", "500"]))
            }},
            "/v1/sessions/{sid}/submit": {"post": {
                "operationId": "submit",
                "summary": "Check the workspace's function on all tests; the session then closes (on outcome `error` it stays open: submit again)",
                "parameters": [sid()],
                "responses": with(json!({"200": ok("The reward", json!({"type": "object", "required": ["outcome", "reward", "passed_all"], "properties": {
                    "outcome": {"enum": ["pass", "fail", "error"]},
                    "reward": {"type": ["number", "null"], "minimum": 0, "maximum": 1, "description": "null on outcome `error`"},
                    "passed_all": {"type": "boolean"},
                    "passed": {"type": "integer"}, "total": {"type": "integer"},
                    "error": {"type": ["string", "null"]}
                }}))}), errors(&["401", "404", "500"]))
            }},
            "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document", "responses": {"200": ok("The document", json!({"type": "object"}))}}}
        }
    })
}
