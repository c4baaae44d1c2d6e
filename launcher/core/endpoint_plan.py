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
from launcher.core.spec.deployments import ENDPOINT, served_name
from launcher.core.spec.sections import EndpointSection, Node, Spec

ROUTER = "litellm"
ROUTER_VERSION = "1.106.12"
ROUTER_PIN = f"litellm[proxy]=={ROUTER_VERSION}"
CONFIG_FILE = "router.yaml"  # in the endpoint's run directory, where the router runs
API_KEY = "VLLM_API_KEY"  # a spec secret: the deployments' key is the endpoint's too
# The proxy refuses to start without a master key unless told that no key is meant: the
# deployments behind it then take requests without a key as well.
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
    """Where deployment `name` serves: its rank 0's address (or the host it binds) and API port."""
    host = spec.serve.get("host")
    address = str(host) if host not in (None, "", "0.0.0.0", "::") else spec.nodes[0].address
    return Route(name, served_name(spec), f"http://{address}:{plan.api_port}/v1")


def endpoint_plan(
    cluster: str,
    head: Node,
    section: EndpointSection,
    routes: tuple[Route, ...],
    spec_env: dict[str, str],
    secrets: tuple[str, ...],
) -> EndpointPlan:
    """The router's command, environment (the spec's, and the router's own) and config."""
    keyed = API_KEY in secrets
    argv = (
        f"{section.venv}/bin/{ROUTER}",
        "--config",
        CONFIG_FILE,
        "--host",
        head.address,
        "--port",
        str(section.port),
    )
    env = dict(sorted({**spec_env, **OFFLINE, **({} if keyed else NO_KEY)}.items()))
    return EndpointPlan(
        f"{cluster}/{ENDPOINT}",
        head,
        section.port,
        routes,
        argv,
        env,
        (API_KEY,) if keyed else (),
        router_config(routes, keyed),
    )


def router_config(routes: tuple[Route, ...], keyed: bool) -> str:
    """LiteLLM's config: one model per deployment, no retries (a deployment that is down says so)."""
    key = {"api_key": f"os.environ/{API_KEY}"} if keyed else {}
    models = [
        {
            "model_name": r.model,
            "litellm_params": {"model": f"hosted_vllm/{r.model}", "api_base": r.url, **key},
        }
        for r in routes
    ]
    config = {
        "model_list": models,
        "litellm_settings": {"num_retries": 0, "request_timeout": 600, "telemetry": False},
        "general_settings": {"master_key": f"os.environ/{API_KEY}"} if keyed else {},
    }
    return json.dumps(config, indent=2) + "\n"  # JSON is YAML: the proxy reads it as its YAML config
