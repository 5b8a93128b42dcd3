/**
 * The page imports oauth4webapi as './vendor/oauth4webapi.js', the module the service serves at
 * /ui/vendor/oauth4webapi.js from the package as it ships (the page is not bundled, and a bare
 * 'oauth4webapi' would need an import map, an inline script its policy refuses): its types here.
 */
export * from 'oauth4webapi'
