"""The endpoint: LiteLLM's proxy on the head node, routing each request by its `model`. Pure.

Why LiteLLM: it is the widely used, actively maintained OpenAI-compatible proxy that installs
from PyPI into a venv of its own on the node's Python; it routes /v1/completions and
/v1/chat/completions by the body's `model` to a list of backends given in a config file,
lists them on GET /v1/models, answers with the served name as `model`, and gives OpenAI-style
errors (400 for a model it does not know, 500 for one whose deployment is not up). vLLM's own
router (`vllm-router`) balances replicas of one model and registers multi-model workers only at
run time. The release is pinned exactly (ROUTER_PIN), with every package it needs, by hash
(scripts/router-requirements.txt); scripts/router-venv.sh builds that venv.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from hashlib import sha256

from launcher.core.plan import Plan
from launcher.core.spec.deployments import API_KEY, ENDPOINT, served_name
from launcher.core.spec.sections import EndpointSection, Node, Spec

ROUTER = "litellm"
ROUTER_VERSION = "1.106.12"
ROUTER_PIN = f"litellm[proxy]=={ROUTER_VERSION}"
CONFIG_FILE = "router.yaml"  # in the endpoint's run directory, where the router runs
# The proxy refuses to start without a master key unless told that no key is meant: only ever
# set for a spec that says so itself (endpoint.auth: none), and said by validate, plan and up.
NO_KEY = {"LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
# The router reaches no one but its deployments. LiteLLM (1.106.12) fetches from the internet
# (GitHub, its own site), unless told to use the copy it ships: its price table at start;
# Anthropic's beta headers on a request; the auto-router presets and its blog's posts when anyone
# asks /public/autorouter_presets or /public/litellm_blog_posts (no key needed); the policy
# templates for its UI. LITELLM_MODE other than DEV: it loads no `.env` file from the folders
# above its install (the node user's home among them). HF_HUB_OFFLINE: no tokenizer downloaded.
OFFLINE = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
}
LIVE_PATH = "/health/liveliness"  # answers once the proxy serves; /health asks every backend


@dataclass(frozen=True, slots=True)
class Route:
    """One deployment as the endpoint sees it: the served name, and where its API listens."""

    deployment: str
    model: str
    url: str


@dataclass(frozen=True, slots=True)
class EndpointPlan:
    """What runs on the head node for the endpoint, decided before anything runs."""

    cluster: str  # names its run directory, lock and processes: <cluster>/endpoint
    node: Node
    port: int
    routes: tuple[Route, ...]
    argv: tuple[str, ...]
    env: dict[str, str]
    secrets: tuple[str, ...]
    config: str
    key: str | None = None  # the secret clients send (the router's master key); None: auth none
    warnings: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        """A short hash of what runs: equal plans, equal digests."""
        data = [self.argv, self.env, self.secrets, self.config]
        return sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def url(self) -> str:
        """The endpoint's base URL, for clients."""
        return f"http://{self.node.address}:{self.port}/v1"


def route(name: str, spec: Spec, plan: Plan) -> Route:
    """Where deployment `name` serves, as the endpoint on the file's head reaches it: the address
    its API binds (loopback on the endpoint's own node), its rank 0's address for every interface."""
    host = plan.api_listen
    address = spec.nodes[0].address if host in ("0.0.0.0", "::") else host
    shown = f"[{address}]" if ":" in address else address
    return Route(name, served_name(spec), f"http://{shown}:{plan.api_port}/v1")


def endpoint_plan(
    cluster: str,
    head: Node,
    section: EndpointSection,
    routes: tuple[Route, ...],
    spec_env: dict[str, str],
    secrets: tuple[str, ...],
) -> EndpointPlan:
    """The router's command, environment (the spec's, and the router's own) and config: the
    clients' key is the endpoint's own secret (endpoint.key); the deployments' key
    (VLLM_API_KEY, when a secret) is what the router sends them."""
    backend_keyed = API_KEY in secrets
    key = section.key if section.auth == "key" else None
    argv = (
        f"{section.venv}/bin/{ROUTER}",
        "--config",
        CONFIG_FILE,
        "--host",
        head.address,
        "--port",
        str(section.port),
    )
    env = dict(sorted({**spec_env, **OFFLINE, **({} if key else NO_KEY)}.items()))
    names = ((API_KEY,) if backend_keyed else ()) + ((key,) if key else ())
    warnings = () if key else (_open_warning(head, section.port),)
    return EndpointPlan(
        f"{cluster}/{ENDPOINT}",
        head,
        section.port,
        routes,
        argv,
        env,
        names,
        router_config(routes, key, backend_keyed),
        key,
        warnings,
    )


def _open_warning(head: Node, port: int) -> str:
    return (
        f"the endpoint on {head.address}:{port} takes every request without a key (endpoint.auth: "
        "none): whoever reaches that address uses every model, and the router's admin routes; name "
        "a secret as endpoint.key to require one"
    )


def router_config(routes: tuple[Route, ...], key: str | None, backend_keyed: bool) -> str:
    """LiteLLM's config: one model per deployment, no retries (a deployment that is down says so);
    the clients' key (`key`, a variable's name) as its master key; the deployments' key for them."""
    backend = {"api_key": f"os.environ/{API_KEY}"} if backend_keyed else {}
    models = [
        {
            "model_name": r.model,
            "litellm_params": {"model": f"hosted_vllm/{r.model}", "api_base": r.url, **backend},
        }
        for r in routes
    ]
    config = {
        "model_list": models,
        "litellm_settings": {"num_retries": 0, "request_timeout": 600, "telemetry": False},
        "general_settings": {"master_key": f"os.environ/{key}"} if key else {},
    }
    return json.dumps(config, indent=2) + "\n"  # JSON is YAML: the proxy reads it as its YAML config
