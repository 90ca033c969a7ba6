"""The ModelDeployment API: pydantic models (`v1alpha1`) and the CRD generated from them
(`crd`, `modelscale crd`). Pure: no cluster client is imported here."""
