"""The data the secret rules read (:mod:`contextmem.secret_rules` turns each row into a rule).

Provider tokens
---------------
Each row is a token format with a fixed, documented shape: ``(rule id, pattern, hints, check)``
(a hint another rule already uses costs no extra scan of the text: ``gl`` serves GitLab and Grafana),
``check`` being ``"edge"`` (the token does not continue a word on its left) or ``"digit"`` (the same,
and it carries a digit: random keys do, slugs do not). The comment on each row names the public
document the shape comes from. None was written from the held-out samples of
``evals/data/secrets/heldout.json``, which measure these rows rather than define them.

Words of each language
----------------------
A language is one block of words: the nouns that name a secret (``密码``), the verbs that assign one
(``是``, ``改成``), and the units after a number that make it a quantity, not a value (``4096 位``).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["CHINESE", "PROVIDER_TOKENS", "TokenRow", "Words"]

TokenRow = tuple[str, str, tuple[str, ...], Literal["edge", "digit"]]

PROVIDER_TOKENS: tuple[TokenRow, ...] = (
    # Alibaba Cloud RAM, "Create an AccessKey pair": AccessKey IDs start with LTAI.
    ("alibaba-access-key-id", r"LTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])", ("LTAI",), "digit"),
    # Tencent Cloud API 3.0, "Signature": a SecretId is AKID and 32 letters and digits.
    ("tencent-secret-id", r"AKID[A-Za-z0-9]{32}(?![A-Za-z0-9])", ("AKID",), "digit"),
    # Twilio SendGrid, "API Keys": SG. + 22-character id + . + 43-character secret.
    ("sendgrid-api-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ("SG.",), "edge"),
    # Mailgun, "API Authentication": legacy private API keys are key- and 32 hex digits.
    ("mailgun-api-key", r"key-[0-9a-f]{32}(?![0-9a-z])", ("key-",), "digit"),
    # Grafana HTTP API, "Authentication": API keys are base64 JSON that starts {"k":".
    ("grafana-api-key", r"eyJrIjoi[A-Za-z0-9+/]{32,}={0,2}", ("eyJrIjoi",), "edge"),
    # Grafana Cloud, "Access policies": tokens start glc_.
    ("grafana-cloud-token", r"glc_[A-Za-z0-9+/]{32,}={0,2}", ("gl",), "edge"),
    # Grafana, "Service accounts": glsa_ + 32 characters + _ + 8 hex digits.
    ("grafana-service-account-token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", ("gl",), "edge"),
    # Sentry, "Auth Tokens": organization tokens start sntrys_, user tokens sntryu_.
    ("sentry-token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", ("sntry",), "edge"),
    # HashiCorp Vault, "Tokens": service, batch and recovery tokens start hvs., hvb., hvr. (1.10+).
    ("vault-token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}", ("hv",), "edge"),
    # Heroku Dev Center, "Platform API": API tokens start HRKU-.
    ("heroku-api-key", r"HRKU-[A-Za-z0-9_-]{60}", ("HRKU-",), "edge"),
    # PyPI, "API tokens": pypi- and a macaroon whose first bytes encode pypi.org.
    ("pypi-token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", ("pypi-",), "edge"),
    # RubyGems guides, "API key scopes": rubygems_ and 48 hex digits.
    ("rubygems-api-key", r"rubygems_[0-9a-f]{48}", ("rubygems_",), "edge"),
    # crates.io (rust-lang/crates.io, token creation): cio and 32 letters and digits.
    ("crates-io-token", r"cio[A-Za-z0-9]{32}(?![A-Za-z0-9])", ("cio",), "digit"),
    # Docker docs, "Personal access tokens": dckr_pat_ (organization tokens dckr_oat_).
    ("docker-hub-token", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}", ("dckr_",), "edge"),
    # Doppler docs, "Token formats": dp.pt. (personal), dp.st. (service), dp.sa., dp.ct., dp.scim., dp.audit.
    (
        "doppler-token",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        ("dp.",),
        "edge",
    ),
    # 1Password, "Service accounts": tokens start ops_ and a base64 JSON header.
    ("onepassword-service-account-token", r"ops_eyJ[A-Za-z0-9+/=_-]{60,}", ("ops_",), "edge"),
    # New Relic, "API keys": user keys NRAK-, browser NRJS-, insert NRII-, admin NRAA-.
    ("newrelic-key", r"NR(?:AK|JS|II|AA)-[A-Za-z0-9]{19,32}", ("NR",), "edge"),
    # Cloudflare, "API token formats": user tokens start cfut_.
    ("cloudflare-user-token", r"cfut_[A-Za-z0-9_-]{40,}", ("cfut_",), "edge"),
    # Notion developers, "Authorization": internal integration secrets before ntn_ were secret_ + 43.
    ("notion-integration-secret", r"secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])", ("secret_",), "digit"),
    # PlanetScale docs, "Service tokens" and "Passwords": pscale_tkn_, pscale_pw_, pscale_oauth_.
    ("planetscale-token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}", ("pscale_",), "edge"),
    # Microsoft Learn, Azure Container Registry: generated passwords carry +ACR at character 43.
    ("azure-container-registry-password", r"[A-Za-z0-9+/]{42}\+ACR[A-Za-z0-9]{6}", ("+ACR",), "edge"),
)


class Words:
    """One language's words around a secret."""

    def __init__(self, nouns: tuple[str, ...], verbs: tuple[str, ...], units: tuple[str, ...]) -> None:
        self.nouns = nouns  # what names a secret
        self.verbs = verbs  # what assigns a value to it (besides : and =)
        self.units = units  # after a number: a quantity ("4096 位"), not a secret


CHINESE = Words(
    nouns=("密码", "口令", "密钥", "秘钥", "令牌", "私钥", "凭证", "凭据"),
    verbs=("改成了", "改成", "改为", "设置为", "设为", "设成", "是", "为"),
    units=(
        "位",
        "比特",
        "字节",
        "个字符",
        "字符",
        "个",
        "天",
        "小时",
        "分钟",
        "秒",
        "次",
        "bit",
        "byte",
        "KB",
        "MB",
    ),
)
